package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"
)

// node is one documented key: a leaf with its default, or a block of keys.
type node struct {
	name     string
	doc      string
	leaf     bool
	value    any
	children []*node
	// placeholder names the entries of a map in the table in docs/configuration.md ("<engine>"): the first
	// entry's keys are listed under it, the others not.
	placeholder string
}

// child is n's key name (matched case-insensitively), added when missing; added reports that.
func (n *node) child(name string) (c *node, added bool) {
	for _, c := range n.children {
		if strings.EqualFold(c.name, name) {
			return c, false
		}
	}
	c = &node{name: name}
	n.children = append(n.children, c)
	return c, true
}

// build merges the keys of sections into one tree, in order (a section adding keys to a block
// another declared puts them after that block's). It refuses what would make the documentation
// untrue: a key two sections declare, a koanf tag other than its field's lower-cased name, a
// Doc or Maps entry that names no key, a map key without its Maps entry.
func build(sections []AnySection) (*node, error) {
	root := &node{}
	seen := map[AnySection]bool{}
	for _, s := range sections {
		if seen[s] {
			return nil, fmt.Errorf("configuration section %s: listed twice", s.Name())
		}
		seen[s] = true
		prefix := ""
		target := root
		if s.TopKey() != "" {
			prefix = s.TopKey() + ":"
			target, _ = root.child(s.TopKey())
			if target.leaf {
				return nil, fmt.Errorf("configuration key %s: declared twice", s.TopKey())
			}
		}
		if err := checkTags(s.Type(), prefix); err != nil {
			return nil, err
		}
		w := walker{s: s, prefix: prefix, used: map[string]bool{}}
		if err := w.walk(target, "", s.defaults()); err != nil {
			return nil, err
		}
		if d, ok := s.doc()[""]; ok {
			target.doc, w.used[""] = d, true
		}
		for k := range s.doc() {
			if !w.used[k] {
				return nil, fmt.Errorf("configuration section %s: Doc names no key %q", s.Name(), k)
			}
		}
		for k := range s.maps() {
			if !w.usedMaps[k] {
				return nil, fmt.Errorf("configuration section %s: Maps names no map key %q", s.Name(), k)
			}
		}
	}
	return root, nil
}

// walker adds the keys of one section to the tree.
type walker struct {
	s        AnySection
	prefix   string // the section's Key and ':', for messages
	used     map[string]bool
	usedMaps map[string]bool
}

func (w *walker) docOf(rel string) string {
	d, ok := w.s.doc()[rel]
	if ok {
		w.used[rel] = true
	}
	return d
}

// walk adds the keys of struct v, under the key rel of the section (":"-separated), to parent.
func (w *walker) walk(parent *node, rel string, v reflect.Value) error {
	for _, f := range fields(v.Type()) {
		name := join(rel, f.name)
		n, added := parent.child(f.name)
		if !added && (n.leaf || !isBlock(f.Type)) {
			return fmt.Errorf("configuration key %s%s: declared twice", w.prefix, name)
		}
		if d := w.docOf(name); d != "" {
			n.doc = d
		}
		fv := v.FieldByIndex(f.Index)
		switch f.Type.Kind() {
		case reflect.Struct:
			if err := w.walk(n, name, fv); err != nil {
				return err
			}
		case reflect.Map:
			if err := w.walkMap(n, name, f.Type); err != nil {
				return err
			}
		default:
			n.leaf, n.value = true, fv.Interface()
		}
	}
	return nil
}

// walkMap adds the documented entries of the map key rel, of type t, to n.
func (w *walker) walkMap(n *node, rel string, t reflect.Type) error {
	md, ok := w.s.maps()[rel]
	if !ok || len(md.Entries) == 0 {
		return fmt.Errorf("configuration key %s%s: a map needs the entries to document (Section.Maps)", w.prefix, rel)
	}
	if w.usedMaps == nil {
		w.usedMaps = map[string]bool{}
	}
	w.usedMaps[rel] = true
	n.placeholder = md.Placeholder
	for _, e := range md.Entries {
		c, _ := n.child(e.Name)
		if t.Elem().Kind() != reflect.Struct {
			c.leaf, c.value, c.doc = true, e.Default, e.Doc
			continue
		}
		name := join(rel, e.Name)
		if md.Placeholder != "" {
			name = join(rel, md.Placeholder)
		}
		if err := w.walk(c, name, reflect.New(t.Elem()).Elem()); err != nil {
			return err
		}
	}
	return nil
}

func isBlock(t reflect.Type) bool { return t.Kind() == reflect.Struct || t.Kind() == reflect.Map }

func join(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + ":" + name
}

// Table is the table in docs/configuration.md of every key of the platform and sections: its name, its default
// and its documentation.
func Table(sections ...AnySection) (string, error) {
	root, err := build(append([]AnySection{Platform}, sections...))
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("| Key (environment: `Section__Key`) | Default | Meaning |\n|---|---|---|\n")
	var rows func(n *node, path string)
	rows = func(n *node, path string) {
		for i, c := range n.children {
			name := join(path, c.name)
			if n.placeholder != "" {
				if i > 0 {
					break
				}
				name = join(path, n.placeholder)
			}
			if !c.leaf {
				rows(c, name)
				continue
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", name, cell(yamlValue(c.value)), cell(c.doc))
		}
	}
	rows(root, "")
	return b.String(), nil
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// The table lies between these lines.
const (
	TableBegin = "<!-- configuration keys: generated from the sections (go generate ./app) -->"
	TableEnd   = "<!-- end of configuration keys -->"
)

// ReplaceTable is readme with the text between TableBegin and TableEnd replaced by table.
func ReplaceTable(readme []byte, table string) ([]byte, error) {
	before, rest, ok := bytes.Cut(readme, []byte(TableBegin+"\n"))
	_, after, ok2 := bytes.Cut(rest, []byte(TableEnd))
	if !ok || !ok2 {
		return nil, errors.New("docs/configuration.md: the configuration table's markers are missing")
	}
	out := append(append(append([]byte{}, before...), TableBegin+"\n"...), table...)
	return append(append(out, TableEnd...), after...), nil
}

// exampleHeader opens config/config.example.yaml.
const exampleHeader = `# Example configuration of the resource provisioning service. Copy to config/config.yaml (or point
# CONFIG_FILE at a file) and adjust. Every key can also come from the environment with ASP.NET
# names: Jwt:Key is Jwt__Key, Frontend:Origins item 0 is Frontend__Origins__0 (case-insensitive).
# Precedence: built-in defaults < this file < environment. Secrets belong in the environment.
#
# Generated from the configuration sections of the platform and the modules (go generate ./app).
`

// Example is config/config.example.yaml for the platform and sections: every key with its default
// and its documentation.
func Example(sections ...AnySection) ([]byte, error) {
	root, err := build(append([]AnySection{Platform}, sections...))
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(exampleHeader)
	var write func(n *node, indent string)
	write = func(n *node, indent string) {
		for _, c := range n.children {
			if indent == "" {
				b.WriteString("\n")
			}
			if c.leaf {
				line := indent + c.name + ": " + yamlValue(c.value)
				if c.doc == "" {
					b.WriteString(line + "\n")
					continue
				}
				if len(line) < commentColumn {
					line += strings.Repeat(" ", commentColumn-len(line))
				} else {
					line += "  "
				}
				if len(line)+2+len(c.doc) <= maxLine {
					b.WriteString(line + "# " + c.doc + "\n")
					continue
				}
				comment(&b, indent, c.doc)
				b.WriteString(indent + c.name + ": " + yamlValue(c.value) + "\n")
				continue
			}
			comment(&b, indent, c.doc)
			b.WriteString(indent + c.name + ":\n")
			write(c, indent+"  ")
		}
	}
	write(root, "")
	return []byte(b.String()), nil
}

// Layout of the example: comments after values start at commentColumn; a line that would be
// longer than maxLine has its comment above it instead, wrapped.
const (
	commentColumn = 38
	maxLine       = 120
	wrapAt        = 100
)

// comment writes text as comment lines at indent, wrapped at wrapAt columns.
func comment(b *strings.Builder, indent, text string) {
	if text == "" {
		return
	}
	line := indent + "#"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > wrapAt && line != indent+"#" {
			b.WriteString(line + "\n")
			line = indent + "#"
		}
		line += " " + w
	}
	b.WriteString(line + "\n")
}

// yamlValue is v as YAML writes it on one line (lists in flow style).
func yamlValue(v any) string {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	if n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode {
		n.Style = yaml.FlowStyle
	}
	out, err := yaml.Marshal(&n)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(string(out), "\n")
}
