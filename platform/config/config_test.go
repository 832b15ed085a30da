package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"provisioner/platform/config"
)

const goodKey = "k9VzL2qP8xR4mT7wY1bN6cF3hJ0sD5gA"
const goodEnc = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func required() []string {
	return []string{"Jwt__Key=" + goodKey, "Secrets__EncryptionKey=" + goodEnc}
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestDefaultsApplyWithoutFileOrEnvironment(t *testing.T) {
	cfg, err := config.Load(config.Source{File: "/dev/null", Env: required()})
	require.NoError(t, err)
	assert.Equal(t, 5133, cfg.Server.Port)
	assert.Equal(t, "Production", cfg.Environment)
	assert.Equal(t, "provisioner", cfg.Jwt.Issuer)
	assert.Equal(t, "provisioner-clients", cfg.Jwt.Audience)
	assert.Equal(t, 60, cfg.Jwt.ExpiryMinutes)
	assert.Equal(t, 3, cfg.Databases.MaxPerUser)
	assert.Equal(t, 8, cfg.Databases.MaxEngineWaits)
	assert.EqualValues(t, 536870912, cfg.Databases.DefaultMaxSpaceBytes)
	assert.Equal(t, 1, cfg.Dns.RecordTtl)
	assert.Equal(t, 5, cfg.Dns.MaxRecordsPerUser)
	assert.Equal(t, 15, cfg.WfautoProvisioning.TimeoutSeconds)
	assert.Equal(t, 10, cfg.AiKeys.MaxPerUser)
	assert.Equal(t, []string{"http://localhost:5173"}, cfg.AllowedOrigins())
	assert.Empty(t, cfg.ConnectionStrings.TenantMysql)
}

func TestFileThenEnvironmentPrecedence(t *testing.T) {
	file := writeFile(t, `
Server:
  Port: 6000
  PublicUrl: https://api.example.com
Jwt:
  Issuer: from-file
  Audience: file-audience
Frontend:
  Origins: [https://a.example.com, https://b.example.com]
RateLimit:
  Login: 20-M
`)
	env := append(required(), "JWT__ISSUER=from-env", "server__port=7000", "Frontend__Origins__0=https://c.example.com",
		"Frontend__Origins__1=https://d.example.com", "Unrelated__Thing=1", "PATH=/usr/bin")
	cfg, err := config.Load(config.Source{File: file, Env: env})
	require.NoError(t, err)
	assert.Equal(t, 7000, cfg.Server.Port, "environment beats file")
	assert.Equal(t, "from-env", cfg.Jwt.Issuer, "names are case-insensitive")
	assert.Equal(t, "file-audience", cfg.Jwt.Audience, "file beats defaults")
	assert.Equal(t, "https://api.example.com", cfg.Server.PublicUrl)
	assert.Equal(t, []string{"https://c.example.com", "https://d.example.com"}, cfg.Frontend.Origins, "list items __0, __1")
	assert.Equal(t, "20-M", cfg.RateLimit["login"])
}

func TestConfigFileFromEnvironment(t *testing.T) {
	file := writeFile(t, "Dns:\n  ZoneName: example.org\n  RecordTtl: 300\n")
	cfg, err := config.Load(config.Source{Env: append(required(), "CONFIG_FILE="+file)})
	require.NoError(t, err)
	assert.Equal(t, "example.org", cfg.Dns.ZoneName)
	assert.Equal(t, 300, cfg.Dns.RecordTtl)

	_, err = config.Load(config.Source{Env: append(required(), "CONFIG_FILE=/nonexistent/config.yaml")})
	require.Error(t, err, "a named file that is missing is an error")
}

func TestAspNetEnvironmentName(t *testing.T) {
	cfg, err := config.Load(config.Source{File: "/dev/null", Env: append(required(), "ASPNETCORE_ENVIRONMENT=Development")})
	require.NoError(t, err)
	assert.True(t, cfg.IsDevelopment())
}

func TestValidationNamesTheKey(t *testing.T) {
	cases := []struct {
		name string
		env  []string
		key  string
	}{
		{"missing jwt key", []string{"Secrets__EncryptionKey=" + goodEnc}, "Jwt:Key"},
		{"short jwt key", []string{"Jwt__Key=short", "Secrets__EncryptionKey=" + goodEnc}, "Jwt:Key"},
		{"placeholder jwt key", []string{"Jwt__Key=<JWT_SIGNING_KEY>-changeme-changeme-changeme", "Secrets__EncryptionKey=" + goodEnc}, "Jwt:Key"},
		{"missing encryption key", []string{"Jwt__Key=" + goodKey}, "Secrets:EncryptionKey"},
		{"encryption key not 32 bytes", []string{"Jwt__Key=" + goodKey, "Secrets__EncryptionKey=c2hvcnQ="}, "Secrets:EncryptionKey"},
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
		{"bad port", append(required(), "Server__Port=70000"), "Server:Port"},
		{"public url without a scheme", append(required(), "Server__PublicUrl=localhost:5133"), "Server:PublicUrl"},
		{"public url relative", append(required(), "Server__PublicUrl=api.example.com"), "Server:PublicUrl"},
		{"frontend base url without a scheme", append(required(), "Frontend__BaseUrl=app.example.com"), "Frontend:BaseUrl"},
		{"frontend base url not http", append(required(), "Frontend__BaseUrl=ftp://app.example.com"), "Frontend:BaseUrl"},
		{"origin wildcard", append(required(), "Frontend__Origins__0=*"), "Frontend:Origins:0"},
		{"origin with a path", append(required(), "Frontend__Origins__0=https://a.example.com", "Frontend__Origins__1=https://b.example.com/app"), "Frontend:Origins:1"},
		{"origin without a scheme", append(required(), "Frontend__Origins__0=app.example.com"), "Frontend:Origins:0"},
		{"trusted proxy not an address", append(required(), "Server__TrustedProxies__0=10.0.0.300"), "Server:TrustedProxies:0"},
		{"trusted proxy prefix not a prefix", append(required(), "Server__TrustedProxies__0=10.0.0.1", "Server__TrustedProxies__1=10.0.0.0/33"), "Server:TrustedProxies:1"},
		{"ai timeout zero", append(required(), "Ai__TimeoutSeconds=0"), "Ai:TimeoutSeconds"},
		{"wfauto timeout negative", append(required(), "WfautoProvisioning__TimeoutSeconds=-1"), "WfautoProvisioning:TimeoutSeconds"},
		{"log level not a level", append(required(), "Log__Level=verbose"), "Log:Level"},
		{"engine waits zero", append(required(), "Databases__MaxEngineWaits=0"), "Databases:MaxEngineWaits"},
		{"engine waits near the control pool", append(required(), "Databases__MaxEngineWaits=17"), "Databases:MaxEngineWaits"},
		{"refresh days zero", append(required(), "Auth__RefreshDays=0"), "Auth:RefreshDays"},
		{"reuse interval negative", append(required(), "Auth__RefreshReuseSeconds=-1"), "Auth:RefreshReuseSeconds"},
		{"step-up zero", append(required(), "Auth__StepUpMinutes=0"), "Auth:StepUpMinutes"},
		{"lockout threshold zero", append(required(), "Auth__LockoutThreshold=0"), "Auth:LockoutThreshold"},
		{"lockout window zero", append(required(), "Auth__LockoutWindowMinutes=0"), "Auth:LockoutWindowMinutes"},
		{"lockout delay zero", append(required(), "Auth__LockoutDelaySeconds=0"), "Auth:LockoutDelaySeconds"},
		{"totp issuer with a colon", append(required(), "Auth__TotpIssuer=Acme: Cloud"), "Auth:TotpIssuer"},
		{"admin email with a display name", append(required(), "Bootstrap__AdminEmail=Admin <admin@example.com>"), "Bootstrap:AdminEmail"},
		{"admin email with a quoted local part", append(required(), `Bootstrap__AdminEmail="admin"@example.com`), "Bootstrap:AdminEmail"},
		{"admin password of 129 characters", append(required(), "Bootstrap__AdminEmail=admin@example.com",
			"Bootstrap__AdminPassword="+strings.Repeat("p", 129)), "Bootstrap:AdminPassword"},
		{"admin password of 11 characters, 22 bytes", append(required(), "Bootstrap__AdminEmail=admin@example.com",
			"Bootstrap__AdminPassword="+strings.Repeat("\u00e9", 11)), "Bootstrap:AdminPassword"},
		{"admin password of 11 characters once composed", append(required(), "Bootstrap__AdminEmail=admin@example.com",
			"Bootstrap__AdminPassword="+strings.Repeat("e\u0301", 11)), "Bootstrap:AdminPassword"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(config.Source{File: "/dev/null", Env: tc.env})
			require.Error(t, err)
			var ve *config.ValidationError
			require.ErrorAs(t, err, &ve)
			assert.Equal(t, tc.key, ve.Key)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// TestDnsZoneNameRequiredOnlyWhenConfigured: the DNS cell needs its zone's name once it is
// configured (every fqdn ends in it, and the lookups match on it); unconfigured, nothing is asked.
func TestDnsZoneNameRequiredOnlyWhenConfigured(t *testing.T) {
	_, err := config.Load(config.Source{File: "/dev/null", Env: required()})
	require.NoError(t, err, "DNS not configured: no zone name needed")
	cfg, err := config.Load(config.Source{File: "/dev/null", Env: append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok",
		"Dns__ZoneName=Example.COM.", "Dns__DefaultContent=203.0.113.10")})
	require.NoError(t, err)
	assert.True(t, cfg.Dns.Enabled())
}

func TestDevelopmentAllowsPlaceholderKeyButNotShortOne(t *testing.T) {
	env := []string{"Environment=Development", "Jwt__Key=dev-secret-dev-secret-dev-secret-dev", "Secrets__EncryptionKey=" + goodEnc}
	_, err := config.Load(config.Source{File: "/dev/null", Env: env})
	require.NoError(t, err)
	env[1] = "Jwt__Key=short"
	_, err = config.Load(config.Source{File: "/dev/null", Env: env})
	require.Error(t, err)
}

// TestExampleDocumentsEveryKey keeps config/config.example.yaml true to the Config struct: every
// key of the struct appears in the example and the example parses into a valid configuration.
func TestExampleDocumentsEveryKey(t *testing.T) {
	raw, err := os.ReadFile("../../config/config.example.yaml")
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
	for _, key := range structKeys(reflect.TypeOf(config.Config{}), "") {
		assert.True(t, have[key], "config.example.yaml lacks %s", key)
	}

	_, err = config.Load(config.Source{File: "../../config/config.example.yaml", Env: required()})
	require.NoError(t, err, "the example is a valid configuration once the secrets are set")
}

func structKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
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

// TestReadmeTableListsEveryKey keeps the README's configuration table true to the Config struct.
func TestReadmeTableListsEveryKey(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := strings.ToLower(string(raw))
	for _, key := range structKeys(reflect.TypeOf(config.Config{}), "") {
		name := strings.ReplaceAll(key, ".", ":")
		name = strings.Replace(name, "engines:postgres", "engines:<engine>", 1)
		assert.Contains(t, readme, "| `"+name+"` |", "README's configuration table lacks %s", name)
	}
}

// The bootstrap admin's password is counted as every account password is: characters (code points)
// of its NFKC form, so 12 accented letters pass outside Development however they are written.
func TestBootstrapAdminPasswordCountsCharacters(t *testing.T) {
	for name, pw := range map[string]string{
		"composed":   strings.Repeat("\u00e9", 12),
		"decomposed": strings.Repeat("e\u0301", 12),
		"128 ASCII":  strings.Repeat("p", 128),
	} {
		_, err := config.Load(config.Source{File: "/dev/null", Env: append(required(), "Bootstrap__AdminEmail=admin@example.com",
			"Bootstrap__AdminPassword="+pw)})
		assert.NoError(t, err, name)
	}
}

// TestOriginsAreServedAsBrowsersSendThem: a browser sends Origin lower-cased and without the
// scheme's default port, and CORS compares it exactly: an origin configured as
// https://App.Example.com:443/ is the one https://app.example.com sends.
func TestOriginsAreServedAsBrowsersSendThem(t *testing.T) {
	cfg, err := config.Load(config.Source{File: "/dev/null", Env: append(required(),
		"Frontend__Origins__0=https://App.Example.com:443/", "Frontend__Origins__1=http://localhost:5173")})
	require.NoError(t, err)
	assert.Equal(t, []string{"https://app.example.com", "http://localhost:5173"}, cfg.AllowedOrigins())
	cfg, err = config.Load(config.Source{File: "/dev/null", Env: append(required(), "Frontend__BaseUrl=HTTP://LocalHost:80/app")})
	require.NoError(t, err)
	assert.Equal(t, []string{"http://localhost"}, cfg.AllowedOrigins())
}

// TestDnsCellSubdomainAccepted: a cell subdomain of one or more labels, in any case, with or
// without dots at its ends, is accepted (records are label.<subdomain>.<zone>).
func TestDnsCellSubdomainAccepted(t *testing.T) {
	for _, sub := range []string{"cell", "Cell.", ".cell", "a.cell", "example"} {
		_, err := config.Load(config.Source{File: "/dev/null", Env: append(required(), "Dns__ZoneId=zone1", "Dns__ApiToken=tok",
			"Dns__ZoneName=example.com", "Dns__CellSubdomain="+sub)})
		assert.NoError(t, err, sub)
	}
}
