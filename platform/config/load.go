package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/v2"
)

// Defaults returns the built-in defaults of CONTRACT §1.
func Defaults() map[string]any {
	return map[string]any{
		"environment":                       "Production",
		"server.port":                       5133,
		"server.publicurl":                  "http://localhost:5133",
		"server.shutdowntimeoutseconds":     10,
		"connectionstrings.control":         "postgres://postgres@127.0.0.1:5432/provisioner?sslmode=disable",
		"connectionstrings.tenantpostgres":  "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"databases.maxperuser":              3,
		"databases.defaultmaxspacebytes":    536870912,
		"databases.defaultengine":           "postgres",
		"databases.usagerefreshseconds":     30,
		"databases.maxconnectionsperrole":   10,
		"databases.maxenginewaits":          8,
		"redis.keyprefix":                   "prov",
		"jwt.issuer":                        "provisioner",
		"jwt.audience":                      "provisioner-clients",
		"jwt.expiryminutes":                 60,
		"frontend.baseurl":                  "http://localhost:5173",
		"dns.baseurl":                       "https://api.cloudflare.com/client/v4",
		"dns.recordttl":                     1,
		"dns.proxied":                       false,
		"dns.maxrecordsperuser":             5,
		"dns.timeoutseconds":                10,
		"dns.outboundrate":                  "200-M",
		"wfautoprovisioning.timeoutseconds": 15,
		"ai.timeoutseconds":                 120,
		"aikeys.maxperuser":                 10,
		"smtp.port":                         587,
		"smtp.from":                         "no-reply@localhost",
		"finisher.intervalmillis":           1000,
		"finisher.maxattempts":              8,
		"finisher.batchsize":                16,
		"log.level":                         "info",
		"auth.refreshdays":                  30,
		"auth.refreshreuseseconds":          10,
		"auth.stepupminutes":                10,
		"auth.lockoutthreshold":             10,
		"auth.lockoutwindowminutes":         15,
		"auth.lockoutdelayseconds":          1,
		"auth.totpissuer":                   "Provisioner",
	}
}

// Source is where Load reads from; zero values mean the process's own (os.Environ, CONFIG_FILE).
type Source struct {
	// File is the YAML file; empty means $CONFIG_FILE, else config/config.yaml when it exists.
	File string
	// Env is the environment as KEY=VALUE pairs; nil means os.Environ().
	Env []string
	// Overrides are applied last, with ':'- or '.'-separated keys (tests).
	Overrides map[string]any
}

// Load reads defaults < file < environment < overrides into a Config and validates it.
func Load(src Source) (*Config, error) {
	cfg, err := LoadUnvalidated(src)
	if err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// LoadUnvalidated is Load without the startup checks (for `migrate` and tooling).
func LoadUnvalidated(src Source) (*Config, error) {
	k := koanf.New(".")
	if err := k.Load(confmap.Provider(Defaults(), "."), nil); err != nil {
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

	if err := k.Load(confmap.Provider(fromEnv(env), "."), nil); err != nil {
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

	var cfg Config
	err := k.UnmarshalWithConf("", &cfg, koanf.UnmarshalConf{
		Tag: "koanf",
		DecoderConfig: &mapstructure.DecoderConfig{
			DecodeHook: mapstructure.ComposeDecodeHookFunc(
				indexedMapToSlice,
				mapstructure.StringToSliceHookFunc(","),
				mapstructure.StringToTimeDurationHookFunc(),
			),
			WeaklyTypedInput: true,
			Result:           &cfg,
			TagName:          "koanf",
			Squash:           true,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("decode configuration: %w", err)
	}
	if cfg.Engines == nil {
		cfg.Engines = map[string]EnginePublic{}
	}
	if cfg.RateLimit == nil {
		cfg.RateLimit = map[string]string{}
	}
	return &cfg, nil
}

// fromEnv turns ASP.NET-style variables (Section__Key, case-insensitive) into dotted lower-case keys.
// Only variables whose first section is a known top-level key are read; ASPNETCORE_ENVIRONMENT sets
// Environment unless Environment itself is set.
func fromEnv(env []string) map[string]any {
	known := map[string]bool{}
	t := reflect.TypeOf(Config{})
	for i := 0; i < t.NumField(); i++ {
		known[strings.Split(t.Field(i).Tag.Get("koanf"), ",")[0]] = true
	}
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
