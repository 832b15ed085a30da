package app_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"provisioner/app"
	"provisioner/modules/aikeys"
	"provisioner/modules/databases"
	"provisioner/modules/dns"
	"provisioner/modules/wfauto"
	"provisioner/platform/config"
	"provisioner/platform/module"
	"provisioner/platform/ratelimit"
)

// The configuration of the whole service, the platform's keys and every module's section, as
// app.LoadConfig reads it (the platform's own keys have their tests in platform/config).

const goodKey = "k9VzL2qP8xR4mT7wY1bN6cF3hJ0sD5gA"
const goodEnc = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func required() []string {
	return []string{"Jwt__Key=" + goodKey, "Secrets__EncryptionKey=" + goodEnc, "Smtp__Host=smtp.example.com"}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

// TestConfigDocsAreGenerated: config/config.example.yaml and the the table of keys in docs/configuration.md are what
// the configuration sections generate (go generate ./app writes them).
func TestConfigDocsAreGenerated(t *testing.T) {
	example, table, err := app.ConfigDocs()
	require.NoError(t, err)
	committed, err := os.ReadFile("../config/config.example.yaml")
	require.NoError(t, err)
	assert.Equal(t, string(example), string(committed), "config/config.example.yaml is stale: run go generate ./app")
	readme, err := os.ReadFile("../docs/configuration.md")
	require.NoError(t, err)
	want, err := config.ReplaceTable(readme, table)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(readme), "docs/configuration.md is stale: run go generate ./app")
}

// TestModuleSettingsValidationNamesTheKey: a bad value of a module's key stops the process with
// one line naming it, as the platform's keys do.
func TestModuleSettingsValidationNamesTheKey(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		key  string
	}{
		{"bad ttl", append(required(), "Dns__RecordTtl=30"), "Dns:RecordTtl"},
		{"dns configured without a zone name", append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok"), "Dns:ZoneName"},
		{"dns zone name of one label", append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok", "Dns__ZoneName=nozone"), "Dns:ZoneName"},
		{"dns zone name not a name", append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok", "Dns__ZoneName=exa mple.com"), "Dns:ZoneName"},
		// The zone is appended to the cell subdomain: one that already ends with it names records
		// outside where the provider puts them (x.cell.example.com.example.com).
		{"dns cell subdomain ending with the zone", append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok", "Dns__ZoneName=example.com",
			"Dns__CellSubdomain=cell.Example.com"), "Dns:CellSubdomain"},
		{"dns cell subdomain the zone itself", append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok", "Dns__ZoneName=example.com",
			"Dns__CellSubdomain=example.com."), "Dns:CellSubdomain"},
		{"dns cell subdomain not a name", append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok", "Dns__ZoneName=example.com",
			"Dns__CellSubdomain=my cell"), "Dns:CellSubdomain"},
		{"dns cell subdomain with an empty label", append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok", "Dns__ZoneName=example.com",
			"Dns__CellSubdomain=a..b"), "Dns:CellSubdomain"},
		{"dns default content not an address", append(required(), "Dns__DefaultContent=example.com"), "Dns:DefaultContent"},
		{"dns default content loopback", append(required(), "Dns__DefaultContent=127.0.0.1"), "Dns:DefaultContent"},
		{"ai timeout zero", append(required(), "Ai__TimeoutSeconds=0"), "Ai:TimeoutSeconds"},
		// A provider's base URL without a scheme or host would fail every call at run time instead.
		{"dns base url without a scheme", append(required(), "Dns__BaseUrl=api.cloudflare.com/client/v4"), "Dns:BaseUrl"},
		{"wfauto base url not http", append(required(), "WfautoProvisioning__BaseUrl=ftp://cell.internal"), "WfautoProvisioning:BaseUrl"},
		{"ai base url a path", append(required(), "Ai__BaseUrl=/v1"), "Ai:BaseUrl"},
		{"queues management url without a host", append(required(), "Queues__ManagementUrl=http://", "Queues__Username=guest"), "Queues:ManagementUrl"},
		{"wfauto timeout negative", append(required(), "WfautoProvisioning__TimeoutSeconds=-1"), "WfautoProvisioning:TimeoutSeconds"},
		{"engine waits zero", append(required(), "Databases__MaxEngineWaits=0"), "Databases:MaxEngineWaits"},
		{"engine waits near the control pool", append(required(), "Databases__MaxEngineWaits=17"), "Databases:MaxEngineWaits"},
		{"refresh days zero", append(required(), "Auth__RefreshDays=0"), "Auth:RefreshDays"},
		{"reuse interval negative", append(required(), "Auth__RefreshReuseSeconds=-1"), "Auth:RefreshReuseSeconds"},
		{"step-up zero", append(required(), "Auth__StepUpMinutes=0"), "Auth:StepUpMinutes"},
		{"lockout threshold zero", append(required(), "Auth__LockoutThreshold=0"), "Auth:LockoutThreshold"},
		{"lockout window zero", append(required(), "Auth__LockoutWindowMinutes=0"), "Auth:LockoutWindowMinutes"},
		{"lockout delay zero", append(required(), "Auth__LockoutDelaySeconds=0"), "Auth:LockoutDelaySeconds"},
		{"totp issuer with a colon", append(required(), "Auth__TotpIssuer=Acme: Cloud"), "Auth:TotpIssuer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := app.LoadConfig(config.Source{File: "/dev/null", Env: tc.env})
			require.Error(t, err)
			var ve *config.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tc.key, ve.Key)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

func TestDefaultsApplyWithoutFileOrEnvironment(t *testing.T) {
	cfg, err := app.LoadConfig(config.Source{File: "/dev/null", Env: required()})
	require.NoError(t, err)
	assert.Equal(t, 5133, cfg.Server.Port)
	assert.Equal(t, "Production", cfg.Environment)
	assert.Equal(t, "provisioner", cfg.Jwt.Issuer)
	assert.Equal(t, "provisioner-clients", cfg.Jwt.Audience)
	assert.Equal(t, 60, cfg.Jwt.ExpiryMinutes)
	assert.Equal(t, 3, databases.Settings.Of(cfg).Databases.MaxPerUser)
	assert.Equal(t, 8, databases.Settings.Of(cfg).Databases.MaxEngineWaits)
	assert.EqualValues(t, 536870912, databases.Settings.Of(cfg).Databases.DefaultMaxSpaceBytes)
	assert.Equal(t, 1, dns.Settings.Of(cfg).RecordTtl)
	assert.Equal(t, 5, dns.Settings.Of(cfg).MaxRecordsPerUser)
	assert.Equal(t, 15, wfauto.Settings.Of(cfg).TimeoutSeconds)
	assert.Equal(t, 10, aikeys.Settings.Of(cfg).AiKeys.MaxPerUser)
	assert.Equal(t, []string{"http://localhost:5173"}, cfg.AllowedOrigins())
	assert.Empty(t, databases.Settings.Of(cfg).ConnectionStrings.TenantMysql)
}

func TestConfigFileFromEnvironment(t *testing.T) {
	file := writeFile(t, "Dns:\n  ZoneName: example.org\n  RecordTtl: 300\n")
	cfg, err := app.LoadConfig(config.Source{Env: append(required(), "CONFIG_FILE="+file)})
	require.NoError(t, err)
	assert.Equal(t, "example.org", dns.Settings.Of(cfg).ZoneName)
	assert.Equal(t, 300, dns.Settings.Of(cfg).RecordTtl)

	_, err = app.LoadConfig(config.Source{Env: append(required(), "CONFIG_FILE=/nonexistent/config.yaml")})
	require.Error(t, err, "a named file that is missing is an error")
}

// TestDnsZoneNameRequiredOnlyWhenConfigured: the DNS cell needs its zone's name once it is
// configured (every fqdn ends in it, and the lookups match on it); unconfigured, nothing is asked.
func TestDnsZoneNameRequiredOnlyWhenConfigured(t *testing.T) {
	_, err := app.LoadConfig(config.Source{File: "/dev/null", Env: required()})
	require.NoError(t, err, "DNS not configured: no zone name needed")
	cfg, err := app.LoadConfig(config.Source{File: "/dev/null", Env: append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok",
		"Dns__ZoneName=Example.COM.", "Dns__DefaultContent=203.0.113.10")})
	require.NoError(t, err)
	assert.True(t, dns.Settings.Of(cfg).Enabled())
}

// TestExampleDocumentsEveryKey keeps config/config.example.yaml true to the configuration sections:
// every key of the platform's and the modules' sections appears in the example and the example parses into a valid configuration.
func TestExampleDocumentsEveryKey(t *testing.T) {
	raw, err := os.ReadFile("../config/config.example.yaml")
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	have := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			have[prefix] = true
			return
		}
		for k, sub := range m {
			key := strings.ToLower(k)
			if prefix != "" {
				key = prefix + "." + key
			}
			walk(key, sub)
		}
	}
	walk("", doc)
	for _, key := range sectionKeys() {
		assert.True(t, have[key], "config.example.yaml lacks %s", key)
	}

	_, err = app.LoadConfig(config.Source{File: "../config/config.example.yaml", Env: required()})
	require.NoError(t, err, "the example is a valid configuration once the secrets are set")
}

// sectionKeys are the keys of the platform's and every module's configuration section, dotted
// and lower-cased (a map's first documented entry standing for its entries).
func sectionKeys() []string {
	var out []string
	for _, s := range append([]config.AnySection{config.Platform}, module.Sections(app.Modules)...) {
		out = append(out, structKeys(s.Type(), strings.ToLower(s.TopKey()))...)
	}
	return out
}

func structKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("koanf"), ",")
		if tag[0] == "" && len(tag) > 1 && tag[1] == "squash" {
			out = append(out, structKeys(f.Type, prefix)...)
			continue
		}
		key := tag[0]
		if prefix != "" {
			key = prefix + "." + key
		}
		switch {
		case f.Type.Kind() == reflect.Struct:
			out = append(out, structKeys(f.Type, key)...)
		case f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct:
			out = append(out, structKeys(f.Type.Elem(), key+".postgres")...)
		case f.Type.Kind() == reflect.Map:
			out = append(out, key+".perip")
		default:
			out = append(out, key)
		}
	}
	return out
}

// TestReadmeTableListsEveryKey keeps docs/configuration.md true to the configuration sections.
func TestReadmeTableListsEveryKey(t *testing.T) {
	raw, err := os.ReadFile("../docs/configuration.md")
	require.NoError(t, err)
	readme := strings.ToLower(string(raw))
	for _, key := range sectionKeys() {
		name := strings.ReplaceAll(key, ".", ":")
		name = strings.Replace(name, "engines:postgres", "engines:<engine>", 1)
		assert.Contains(t, readme, "| `"+name+"` |", "docs/configuration.md lacks %s", name)
	}
}

// TestDnsCellSubdomainAccepted: a cell subdomain of one or more labels, in any case, with or
// without dots at its ends, is accepted (records are label.<subdomain>.<zone>).
func TestDnsCellSubdomainAccepted(t *testing.T) {
	for _, sub := range []string{"cell", "Cell.", ".cell", "a.cell", "example"} {
		_, err := app.LoadConfig(config.Source{File: "/dev/null", Env: append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok",
			"Dns__ZoneName=example.com", "Dns__CellSubdomain="+sub)})
		assert.NoError(t, err, sub)
	}
}

// TestRateLimitDocumentsEveryLimit: the RateLimit entries the example and the table document are
// the limits ratelimit applies, with their defaults.
func TestRateLimitDocumentsEveryLimit(t *testing.T) {
	documented := map[string]string{}
	for _, e := range config.Platform.Maps["RateLimit"].Entries {
		documented[e.Name] = e.Default
	}
	assert.Equal(t, ratelimit.DefaultRates, documented)
}
