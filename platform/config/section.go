package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/v2"
)

// Section declares one part of the configuration: its keys (the fields of T, koanf tags the
// lower-cased field names: BaseUrl under Key Dns is Dns:BaseUrl, environment Dns__BaseUrl), their
// defaults, documentation and checks (T or *T implementing Validator). The platform's keys are the
// section Platform; a module lists its own in its module.Module. Load fills every section;
// config.example.yaml and docs/configuration.md are generated from them (Example, Table).
type Section[T any] struct {
	// Key is the top-level key the fields of T sit under ("Dns"); empty when T's fields are
	// top-level keys themselves (a section owning several, or adding keys to another's, as the
	// databases module adds ConnectionStrings:TenantPostgres beside the platform's Control).
	Key string
	// Defaults holds the value of every key the configuration leaves out.
	Defaults T
	// Doc is the one line of documentation of each key, by its name under Key, ':'-separated
	// ("ZoneName", "Engines:<engine>:PublicHost"). A struct or map key's line heads its block in
	// the example; a leaf key's follows it there and fills its row of the README's table.
	Doc map[string]string
	// Maps documents the keys whose value is a map, by name under Key ("Engines").
	Maps map[string]MapDoc
}

// MapDoc documents a key whose value is a map: the entries the example lists.
type MapDoc struct {
	// Placeholder stands for an entry's name in the README's table and in Doc ("<engine>": one
	// row per field of the entries' type). Empty: one row per entry, with its own Default and Doc.
	Placeholder string
	// Entries are the entries the example lists, in order.
	Entries []MapEntry
}

// MapEntry is one documented entry of a map key.
type MapEntry struct {
	Name string
	// Default and Doc are those of an entry whose value is a single value (a RateLimit rate).
	Default string
	Doc     string
}

// Validator is implemented by a section's type that checks its values at startup. It returns the
// first problem, a *ValidationError naming the key (one line, as every startup refusal).
type Validator interface{ Validate() error }

// AnySection is a *Section of any type: what Load, Example and Table take.
type AnySection interface {
	// Value is the section's value in cfg, as Load decoded and validated it; ok is false when
	// cfg was loaded without this section.
	Value(cfg *Config) (v any, ok bool)
	// Name is the section's Key, or the names of its top-level keys, for messages.
	Name() string
	// TopKey is the section's Key: "" when its fields are top-level keys.
	TopKey() string
	// Type is the section's type.
	Type() reflect.Type

	defaults() reflect.Value
	doc() map[string]string
	maps() map[string]MapDoc
	decode(k *koanf.Koanf) (any, error)
	validate(v any) error
}

// Of is the section's value in cfg. It panics when cfg was loaded without the section: a module
// reads its value through fx (module.Module.Fx), Of is for tests and tools.
func (s *Section[T]) Of(cfg *Config) T {
	v, ok := s.Value(cfg)
	if !ok {
		panic(fmt.Sprintf("configuration section %s was not loaded", s.Name()))
	}
	return v.(T)
}

// Value implements AnySection.
func (s *Section[T]) Value(cfg *Config) (any, bool) {
	if cfg == nil {
		return nil, false
	}
	v, ok := cfg.sections[s]
	return v, ok
}

// Name implements AnySection.
func (s *Section[T]) Name() string {
	if s.Key != "" {
		return s.Key
	}
	var names []string
	t := s.Type()
	for i := 0; i < t.NumField(); i++ {
		names = append(names, t.Field(i).Name)
	}
	return strings.Join(names, ", ")
}

// TopKey implements AnySection.
func (s *Section[T]) TopKey() string { return s.Key }

// Type implements AnySection.
func (s *Section[T]) Type() reflect.Type { return reflect.TypeFor[T]() }

func (s *Section[T]) defaults() reflect.Value { return reflect.ValueOf(&s.Defaults).Elem() }
func (s *Section[T]) doc() map[string]string  { return s.Doc }
func (s *Section[T]) maps() map[string]MapDoc { return s.Maps }
func (s *Section[T]) validate(v any) error    { return validateValue(v.(T)) }
func (s *Section[T]) decode(k *koanf.Koanf) (any, error) {
	var v T
	if err := unmarshal(k, strings.ToLower(s.Key), &v); err != nil {
		return nil, err
	}
	emptyMaps(reflect.ValueOf(&v).Elem())
	return v, nil
}

// validateValue runs v's Validate, whichever receiver it has.
func validateValue[T any](v T) error {
	if val, ok := any(&v).(Validator); ok {
		return val.Validate()
	}
	return nil
}

// unmarshal decodes the keys under path (all of them for "") into out.
func unmarshal(k *koanf.Koanf, path string, out any) error {
	return k.UnmarshalWithConf(path, out, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook: mapstructure.ComposeDecodeHookFunc(
				indexedMapToSlice,
				mapstructure.StringToSliceHookFunc(","),
				mapstructure.StringToTimeDurationHookFunc(),
			),
			WeaklyTypedInput: true,
			Result:           out,
			TagName:          "koanf",
			Squash:           true,
		},
	})
}

// emptyMaps makes the nil maps of struct v (and of its struct fields) empty, so they can be read
// and written alike.
func emptyMaps(v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch {
		case !f.CanSet():
		case f.Kind() == reflect.Map && f.IsNil():
			f.Set(reflect.MakeMap(f.Type()))
		case f.Kind() == reflect.Struct:
			emptyMaps(f)
		}
	}
}

// field is one koanf-tagged field of a section's type.
type field struct {
	reflect.StructField
	name   string // the key's name as documented: the field's
	tag    string // its koanf name
	squash bool   // an embedded struct whose fields are keys of this level
}

// fields lists the keys of struct type t, embedded squashed structs' fields in place.
func fields(t reflect.Type) []field {
	var out []field
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, opts, _ := strings.Cut(f.Tag.Get("koanf"), ",")
		if tag == "" && strings.Contains(opts, "squash") {
			for _, sub := range fields(f.Type) {
				sub.Index = append([]int{i}, sub.Index...)
				out = append(out, sub)
			}
			continue
		}
		out = append(out, field{StructField: f, name: f.Name, tag: tag})
	}
	return out
}

// checkTags reports the first field of t (and its struct fields) whose koanf tag is not its
// lower-cased name: the name documented would not be the one read.
func checkTags(t reflect.Type, path string) error {
	for _, f := range fields(t) {
		if f.tag != strings.ToLower(f.name) {
			return fmt.Errorf("configuration key %s%s: koanf tag %q, want %q", path, f.name, f.tag, strings.ToLower(f.name))
		}
		ft := f.Type
		if ft.Kind() == reflect.Map {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			if err := checkTags(ft, path+f.name+":"); err != nil {
				return err
			}
		}
	}
	return nil
}
