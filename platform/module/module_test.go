package module_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/platform/config"
	"provisioner/platform/module"
)

type widgetConfig struct {
	Size int `koanf:"size"`
}

var widgetSection = &config.Section[widgetConfig]{Key: "Widget", Defaults: widgetConfig{Size: 3}}

var required = []string{"Jwt__Key=k9VzL2qP8xR4mT7wY1bN6cF3hJ0sD5gA", "Secrets__EncryptionKey=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
	"Smtp__Host=smtp.example.com"}

// A module's graph gets its section's value as the section's type; a configuration loaded without
// the section stops the graph with an error naming the module.
func TestFxSuppliesTheSection(t *testing.T) {
	m := module.Module{Name: "widget", Config: widgetSection, Options: fx.Options()}
	cfg, err := config.Load(config.Source{File: "/dev/null", Env: append(required, "Widget__Size=5")}, module.Sections([]module.Module{m})...)
	require.NoError(t, err)
	var got widgetConfig
	require.NoError(t, fx.New(m.Fx(cfg), fx.Populate(&got), fx.NopLogger).Err())
	assert.Equal(t, 5, got.Size)

	bare, err := config.Load(config.Source{File: "/dev/null", Env: required})
	require.NoError(t, err)
	err = fx.New(m.Fx(bare), fx.NopLogger).Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "module widget")
}

// Tags merge the platform's and every module's; a tag described twice alike is one, differently an error.
func TestTagsMerge(t *testing.T) {
	a := module.Module{Name: "a", Tags: map[string]string{"A": "a's", "Public": "Public information."}}
	b := module.Module{Name: "b", Tags: map[string]string{"B": "b's"}}
	tags, err := module.Tags(map[string]string{"Public": "Public information."}, []module.Module{a, b})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"A": "a's", "B": "b's", "Public": "Public information."}, tags)

	c := module.Module{Name: "c", Tags: map[string]string{"A": "another"}}
	_, err = module.Tags(nil, []module.Module{a, c})
	assert.ErrorContains(t, err, `module c: OpenAPI tag "A"`)
	assert.Equal(t, []string{"x", "y", "x"}, module.AuditNamespaces([]module.Module{{AuditNamespaces: []string{"x", "y"}}, {AuditNamespaces: []string{"x"}}}))
}
