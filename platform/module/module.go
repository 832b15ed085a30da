// Package module describes a resource module to the application: app/modules.go lists one Module
// per resource, so adding a resource is its folder and that one line. Besides its fx wiring, a
// Module carries what the application needs of it outside the graph: its configuration section
// (loaded and validated with the platform's keys before anything starts), the audit namespaces it
// records in, and the descriptions of its OpenAPI tags.
package module

import (
	"fmt"
	"maps"

	"go.uber.org/fx"

	"provisioner/platform/config"
)

// Module is one resource module.
type Module struct {
	// Name is the module's name (its folder), for messages.
	Name string
	// Options is everything the module wires into the fx graph: an fx.Module of its providers.
	Options fx.Option
	// Config is the module's configuration section (a *config.Section[T], in its config.go), or
	// nil. Its value, loaded with the platform's configuration, is supplied to the graph as T.
	Config config.AnySection
	// AuditNamespaces are the first segments of the actions the module records ("dns" for
	// dns.created): the audit Recorder stores the service's events only in declared namespaces,
	// and refuses an Admin's note in them.
	AuditNamespaces []string
	// Tags describe the OpenAPI tags of the module's operations, by name.
	Tags map[string]string
}

// Fx is the module's wiring with its configuration section's value in cfg supplied. A cfg
// loaded without the section is an error of the graph, naming the module.
func (m Module) Fx(cfg *config.Config) fx.Option {
	if m.Config == nil {
		return m.Options
	}
	v, ok := m.Config.Value(cfg)
	if !ok {
		return fx.Error(fmt.Errorf("module %s: its configuration section (%s) was not loaded", m.Name, m.Config.Name()))
	}
	return fx.Options(m.Options, fx.Supply(v))
}

// Sections are the configuration sections of mods, in order.
func Sections(mods []Module) []config.AnySection {
	var out []config.AnySection
	for _, m := range mods {
		if m.Config != nil {
			out = append(out, m.Config)
		}
	}
	return out
}

// AuditNamespaces are the audit namespaces mods declare, in order (repeats included).
func AuditNamespaces(mods []Module) []string {
	var out []string
	for _, m := range mods {
		out = append(out, m.AuditNamespaces...)
	}
	return out
}

// Tags are the OpenAPI tag descriptions of base (the platform's) and of mods. A tag two of them
// describe differently is an error naming it.
func Tags(base map[string]string, mods []Module) (map[string]string, error) {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	for _, m := range mods {
		for name, d := range m.Tags {
			if prev, ok := out[name]; ok && prev != d {
				return nil, fmt.Errorf("module %s: OpenAPI tag %q is described already, otherwise", m.Name, name)
			}
			out[name] = d
		}
	}
	return out, nil
}
