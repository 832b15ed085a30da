package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/config"
)

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
		{"bad port", append(required(), "Server__Port=70000"), "Server:Port"},
		{"public url without a scheme", append(required(), "Server__PublicUrl=localhost:5133"), "Server:PublicUrl"},
		{"public url relative", append(required(), "Server__PublicUrl=api.example.com"), "Server:PublicUrl"},
		{"frontend base url without a scheme", append(required(), "Frontend__BaseUrl=app.example.com"), "Frontend:BaseUrl"},
		{"frontend base url not http", append(required(), "Frontend__BaseUrl=ftp://app.example.com"), "Frontend:BaseUrl"},
		{"origin wildcard", append(required(), "Frontend__Origins__0=*"), "Frontend:Origins:0"},
		{"origin with a path", append(required(), "Frontend__Origins__0=https://a.example.com", "Frontend__Origins__1=https://b.example.com/app"), "Frontend:Origins:1"},
		{"origin without a scheme", append(required(), "Frontend__Origins__0=app.example.com"), "Frontend:Origins:0"},
		{"return path relative", append(required(), "Frontend__ReturnPaths__0=app"), "Frontend:ReturnPaths:0"},
		{"return path with a dot segment", append(required(), "Frontend__ReturnPaths__0=/app", "Frontend__ReturnPaths__1=/app/../x"), "Frontend:ReturnPaths:1"},
		{"return path encoded", append(required(), "Frontend__ReturnPaths__0=/app%2F"), "Frontend:ReturnPaths:0"},
		{"return path with //", append(required(), "Frontend__ReturnPaths__0=//evil.example"), "Frontend:ReturnPaths:0"},
		{"trusted proxy not an address", append(required(), "Server__TrustedProxies__0=10.0.0.300"), "Server:TrustedProxies:0"},
		{"trusted proxy prefix not a prefix", append(required(), "Server__TrustedProxies__0=10.0.0.1", "Server__TrustedProxies__1=10.0.0.0/33"), "Server:TrustedProxies:1"},
		{"no smtp host outside development", []string{"Jwt__Key=" + goodKey, "Secrets__EncryptionKey=" + goodEnc}, "Smtp:Host"},
		{"smtp host blank outside development", append(required(), "Smtp__Host= "), "Smtp:Host"},
		{"smtp security not a mode", append(required(), "Smtp__Security=ssl"), "Smtp:Security"},
		{"smtp in clear text to another host", append(required(), "Smtp__Security=none"), "Smtp:Security"},
		{"smtp port out of range", append(required(), "Smtp__Port=70000"), "Smtp:Port"},
		{"ipv6 limit prefix too short", append(required(), "Server__Ipv6LimitPrefix=16"), "Server:Ipv6LimitPrefix"},
		{"write timeout zero", append(required(), "Server__WriteTimeoutSeconds=0"), "Server:WriteTimeoutSeconds"},
		{"idle timeout zero", append(required(), "Server__IdleTimeoutSeconds=0"), "Server:IdleTimeoutSeconds"},
		{"connections per ip negative", append(required(), "Server__MaxConnectionsPerIp=-1"), "Server:MaxConnectionsPerIp"},
		{"metrics cidr not a cidr", append(required(), "Ops__MetricsAllowedCidrs__0=10.0.0.0/8", "Ops__MetricsAllowedCidrs__1=office"), "Ops:MetricsAllowedCidrs:1"},
		{"metrics token short", append(required(), "Ops__MetricsToken=abc123"), "Ops:MetricsToken"},
		{"log level not a level", append(required(), "Log__Level=verbose"), "Log:Level"},
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

func TestDevelopmentAllowsPlaceholderKeyButNotShortOne(t *testing.T) {
	env := []string{"Environment=Development", "Jwt__Key=dev-secret-dev-secret-dev-secret-dev", "Secrets__EncryptionKey=" + goodEnc}
	_, err := config.Load(config.Source{File: "/dev/null", Env: env})
	require.NoError(t, err)
	env[1] = "Jwt__Key=short"
	_, err = config.Load(config.Source{File: "/dev/null", Env: env})
	require.Error(t, err)
}

// TestSmtpRequirementsOutsideDevelopment: Development may leave Smtp:Host empty (mails go to the
// log) and send in clear text anywhere; elsewhere clear text is only for a relay on this machine.
func TestSmtpRequirementsOutsideDevelopment(t *testing.T) {
	dev := []string{"Environment=Development", "Jwt__Key=" + goodKey, "Secrets__EncryptionKey=" + goodEnc}
	for name, env := range map[string][]string{
		"development without a host": dev,
		"development in clear text":  append(dev, "Smtp__Host=smtp.example.com", "Smtp__Security=none"),
		"clear text to localhost":    append(required(), "Smtp__Host=localhost", "Smtp__Security=none"),
		"clear text to 127.0.0.1":    append(required(), "Smtp__Host=127.0.0.1", "Smtp__Security=None"),
		"clear text to ::1":          append(required(), "Smtp__Host=::1", "Smtp__Security=none"),
		"implicit tls":               append(required(), "Smtp__Security=tls"),
	} {
		cfg, err := config.Load(config.Source{File: "/dev/null", Env: env})
		require.NoError(t, err, name)
		assert.Contains(t, []string{"starttls", "tls", "none"}, cfg.Smtp.SecurityMode(), name)
	}
	cfg, err := config.Load(config.Source{File: "/dev/null", Env: required()})
	require.NoError(t, err)
	assert.Equal(t, "starttls", cfg.Smtp.SecurityMode(), "the default")
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

//END
