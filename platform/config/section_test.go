package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/config"
)

// widget is a module's section under its own key.
type widget struct {
	BaseUrl string   `koanf:"baseurl"`
	Size    int      `koanf:"size"`
	Tags    []string `koanf:"tags"`
}

func (w widget) Validate() error {
	if w.Size < 1 {
		return &config.ValidationError{Key: "Widget:Size", Reason: "must be at least 1"}
	}
	return nil
}

var widgetSection = &config.Section[widget]{
	Key:      "Widget",
	Defaults: widget{BaseUrl: "https://widget.example", Size: 3},
	Doc:      map[string]string{"Size": "how many"},
}

// gadget is a section of top-level keys, one of them added to a block of the platform's.
type gadget struct {
	ConnectionStrings struct {
		Gadget string `koanf:"gadget"`
	} `koanf:"connectionstrings"`
	Gadgets map[string]struct {
		Port int `koanf:"port"`
	} `koanf:"gadgets"`
}

var gadgetSection = &config.Section[gadget]{
	Doc:  map[string]string{"ConnectionStrings:Gadget": "the gadget server", "Gadgets:<name>:Port": "its port"},
	Maps: map[string]config.MapDoc{"Gadgets": {Placeholder: "<name>", Entries: []config.MapEntry{{Name: "a"}, {Name: "b"}}}},
}

// A module's section is filled from defaults < file < environment like the platform's keys,
// validated after them (one line naming the key), and read back with Of.
func TestSectionsAreLoadedAndValidated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, []byte("Widget:\n  Size: 7\n  Tags: [x]\nConnectionStrings:\n  Gadget: g://file\n"), 0o600))
	cfg, err := config.Load(config.Source{File: file, Env: append(required(), "WIDGET__BASEURL=https://env.example",
		"Gadgets__a__Port=99")}, widgetSection, gadgetSection)
	require.NoError(t, err)
	w := widgetSection.Of(cfg)
	assert.Equal(t, widget{BaseUrl: "https://env.example", Size: 7, Tags: []string{"x"}}, w)
	g := gadgetSection.Of(cfg)
	assert.Equal(t, "g://file", g.ConnectionStrings.Gadget)
	assert.Equal(t, 99, g.Gadgets["a"].Port)
	assert.Equal(t, "postgres://postgres@127.0.0.1:5432/provisioner?sslmode=disable", cfg.ConnectionStrings.Control,
		"the platform's key of the same block keeps its default")

	_, err = config.Load(config.Source{File: "/dev/null", Env: append(required(), "Widget__Size=0")}, widgetSection)
	var ve *config.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "Widget:Size", ve.Key)

	cfg, err = config.Load(config.Source{File: "/dev/null", Env: append(required(), "Widget__Size=0")})
	require.NoError(t, err, "a section not loaded is not validated")
	_, ok := widgetSection.Value(cfg)
	assert.False(t, ok)
	assert.Panics(t, func() { widgetSection.Of(cfg) })
}

// The example and the table list every key of every section with its default and its line of
// documentation, and the example loads as a valid configuration.
func TestSectionsAreDocumented(t *testing.T) {
	example, err := config.Example(widgetSection, gadgetSection)
	require.NoError(t, err)
	for _, line := range []string{"Widget:\n  BaseUrl: https://widget.example\n", "  Size: 3", "# how many", "  Tags: []\n",
		"  Control: postgres://", "  Gadget: \"\"", "Gadgets:\n  a:\n    Port: 0", "  b:\n    Port: 0"} {
		assert.Contains(t, string(example), line)
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(file, example, 0o600))
	_, err = config.Load(config.Source{File: file, Env: required()}, widgetSection, gadgetSection)
	require.NoError(t, err)

	table, err := config.Table(widgetSection, gadgetSection)
	require.NoError(t, err)
	for _, row := range []string{"| `Widget:Size` | `3` | how many |", "| `ConnectionStrings:Gadget` | `\"\"` | the gadget server |",
		"| `Gadgets:<name>:Port` | `0` | its port |", "| `RateLimit:PerIp` | `300-M` |"} {
		assert.Contains(t, table, row)
	}
	assert.NotContains(t, table, "Gadgets:b")
}

// What would make the documentation untrue is refused: a key two sections declare, a koanf tag
// that is not the field's name, a Doc line naming no key, a map without documented entries.
func TestSectionMistakesAreRefused(t *testing.T) {
	type badTag struct {
		BaseUrl string `koanf:"base_url"`
	}
	type noMapDoc struct {
		Things map[string]string `koanf:"things"`
	}
	type jwtKey struct {
		Jwt struct {
			Key string `koanf:"key"`
		} `koanf:"jwt"`
	}
	cases := map[string]config.AnySection{
		"duplicate key":  &config.Section[jwtKey]{},
		"key of a value": &config.Section[widget]{Key: "environment"},
		"tag":            &config.Section[badTag]{Key: "Bad"},
		"doc":            &config.Section[widget]{Key: "Other", Doc: map[string]string{"Sise": "typo"}},
		"map":            &config.Section[noMapDoc]{},
		"listed twice":   widgetSection,
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			sections := []config.AnySection{s}
			if name == "listed twice" {
				sections = append(sections, s)
			}
			_, err := config.Example(sections...)
			assert.Error(t, err)
			_, err = config.Load(config.Source{File: "/dev/null", Env: required()}, sections...)
			assert.Error(t, err)
		})
	}
}
