package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
)

// Source is where Load reads from; zero values mean the process's own (os.Environ, CONFIG_FILE).
type Source struct {
	// File is the YAML file; empty means $CONFIG_FILE, else config/config.yaml when it exists.
	File string
	// Env is the environment as KEY=VALUE pairs; nil means os.Environ().
	Env []string
	// Overrides are applied last, with ':'- or '.'-separated keys (tests).
	Overrides map[string]any
}

// Load reads defaults < file < environment < overrides into the platform's keys (Platform) and
// those of sections, and validates them: the platform's first, then each section's in order. The
// first problem stops it, a *ValidationError naming the key.
func Load(src Source, sections ...AnySection) (*Config, error) {
	cfg, err := LoadUnvalidated(src, sections...)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, s := range sections {
		v, _ := s.Value(cfg)
		if err := s.validate(v); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// LoadUnvalidated is Load without the startup checks (for `migrate` and tooling).
func LoadUnvalidated(src Source, sections ...AnySection) (*Config, error) {
	all := append([]AnySection{Platform}, sections...)
	if _, err := build(all); err != nil {
		return nil, err
	}
	k := koanf.New(".")
	defaults := map[string]any{}
	for _, s := range all {
		flattenValue(strings.ToLower(s.TopKey()), s.defaults(), defaults)
	}
	if err := k.Load(confmap.Provider(defaults, "."), nil); err != nil {
		return nil, fmt.Errorf("load defaults: %w", err)
	}

	env := src.Env
	if env == nil {
		env = os.Environ()
	}
	file := src.File
	if file == "" {
		file = lookupEnv(env, "CONFIG_FILE")
	}
	required := file != ""
	if file == "" {
		file = "config/config.yaml"
	}
	if b, err := os.ReadFile(file); err == nil {
		raw, err := yaml.Parser().Unmarshal(b)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", file, err)
		}
		if err := k.Load(confmap.Provider(flatten(lowerKeys(raw)), "."), nil); err != nil {
			return nil, fmt.Errorf("load %s: %w", file, err)
		}
	} else if required || !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read config file %s: %w", file, err)
	}

	if err := k.Load(confmap.Provider(fromEnv(env, topLevel(all)), "."), nil); err != nil {
		return nil, fmt.Errorf("load environment: %w", err)
	}
	if len(src.Overrides) > 0 {
		o := map[string]any{}
		for key, v := range src.Overrides {
			o[strings.ToLower(strings.ReplaceAll(key, ":", "."))] = v
		}
		if err := k.Load(confmap.Provider(o, "."), nil); err != nil {
			return nil, fmt.Errorf("load overrides: %w", err)
		}
	}

	v, err := Platform.decode(k)
	if err != nil {
		return nil, fmt.Errorf("decode configuration: %w", err)
	}
	cfg := v.(Config)
	cfg.sections = map[AnySection]any{}
	for _, s := range sections { // build refused Platform among them: it is listed twice
		v, err := s.decode(k)
		if err != nil {
			return nil, fmt.Errorf("decode configuration: %w", err)
		}
		cfg.sections[s] = v
	}
	return &cfg, nil
}

// topLevel is the set of top-level keys of sections (lower case).
func topLevel(sections []AnySection) map[string]bool {
	known := map[string]bool{}
	for _, s := range sections {
		if s.TopKey() != "" {
			known[strings.ToLower(s.TopKey())] = true
			continue
		}
		for _, f := range fields(s.Type()) {
			known[f.tag] = true
		}
	}
	return known
}

// flattenValue adds the keys of v under prefix to out as dotted lower-case keys: every value of a
// struct, and lists and maps that are not empty.
func flattenValue(prefix string, v reflect.Value, out map[string]any) {
	for _, f := range fields(v.Type()) {
		key := f.tag
		if prefix != "" {
			key = prefix + "." + key
		}
		fv := v.FieldByIndex(f.Index)
		switch fv.Kind() {
		case reflect.Struct:
			flattenValue(key, fv, out)
		case reflect.Map, reflect.Slice:
			if fv.Len() > 0 {
				out[key] = fv.Interface()
			}
		default:
			out[key] = fv.Interface()
		}
	}
}

// fromEnv turns ASP.NET-style variables (Section__Key, case-insensitive) into dotted lower-case keys.
// Only variables whose first section is a known top-level key are read; ASPNETCORE_ENVIRONMENT sets
// Environment unless Environment itself is set.
func fromEnv(env []string, known map[string]bool) map[string]any {
	out := map[string]any{}
	aspnet := ""
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		lname := strings.ToLower(name)
		if lname == "aspnetcore_environment" {
			aspnet = value
			continue
		}
		parts := strings.Split(lname, "__")
		if !known[parts[0]] || (len(parts) == 1 && parts[0] != "environment") {
			continue
		}
		out[strings.Join(parts, ".")] = value
	}
	if _, ok := out["environment"]; !ok && aspnet != "" {
		out["environment"] = aspnet
	}
	return out
}

func lookupEnv(env []string, name string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// lowerKeys lower-cases every map key recursively, so YAML keys match case-insensitively.
func lowerKeys(v any) map[string]any {
	m, _ := v.(map[string]any)
	out := make(map[string]any, len(m))
	for k, val := range m {
		if sub, ok := val.(map[string]any); ok {
			out[strings.ToLower(k)] = lowerKeys(sub)
			continue
		}
		out[strings.ToLower(k)] = val
	}
	return out
}

// flatten turns nested maps into dotted keys, so a file layer replaces single keys rather than whole sections.
func flatten(m map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(key, sub)
				continue
			}
			out[key] = v
		}
	}
	walk("", m)
	return out
}

// indexedMapToSlice decodes {"0": a, "1": b} (from Key__0, Key__1) into a slice.
func indexedMapToSlice(from, to reflect.Type, data any) (any, error) {
	if to.Kind() != reflect.Slice || from.Kind() != reflect.Map {
		return data, nil
	}
	m, ok := data.(map[string]any)
	if !ok {
		return data, nil
	}
	idx := make([]int, 0, len(m))
	for k := range m {
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 {
			return data, nil
		}
		idx = append(idx, n)
	}
	sort.Ints(idx)
	out := make([]any, 0, len(idx))
	for _, n := range idx {
		out = append(out, m[strconv.Itoa(n)])
	}
	return out, nil
}
