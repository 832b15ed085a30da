// Package config loads the service configuration: built-in defaults, then config/config.yaml (or the
// file named by CONFIG_FILE), then the environment with ASP.NET-style names (Jwt__Key is Jwt:Key,
// case-insensitive; list items are Section__Key__0, __1, ...).
package config

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"provisioner/platform/emailaddr"
	"provisioner/platform/secrets"
)

// Config is the platform's configuration (the section Platform), and the sections of the modules
// it was loaded with (Section.Of). Keys are matched case-insensitively; the koanf tags are the
// lower-cased names of CONTRACT §1.
type Config struct {
	Environment       string            `koanf:"environment"`
	Server            Server            `koanf:"server"`
	ConnectionStrings ConnectionStrings `koanf:"connectionstrings"`
	Redis             Redis             `koanf:"redis"`
	Jwt               Jwt               `koanf:"jwt"`
	Frontend          Frontend          `koanf:"frontend"`
	Secrets           Secrets           `koanf:"secrets"`
	Smtp              Smtp              `koanf:"smtp"`
	Bootstrap         Bootstrap         `koanf:"bootstrap"`
	RateLimit         map[string]string `koanf:"ratelimit"`
	Finisher          Finisher          `koanf:"finisher"`
	Log               Log               `koanf:"log"`
	Ops               Ops               `koanf:"ops"`

	// sections are the values of the modules' sections, by section.
	sections map[AnySection]any
}

// Server holds the listener settings.
type Server struct {
	Port           int      `koanf:"port"`
	PublicUrl      string   `koanf:"publicurl"`
	TrustedProxies []string `koanf:"trustedproxies"`
	// ShutdownTimeoutSeconds bounds graceful shutdown, after which open connections are closed;
	// default 10 (under fx's 15 s stop timeout).
	ShutdownTimeoutSeconds int `koanf:"shutdowntimeoutseconds"`
	// Ipv6LimitPrefix: every per-IP limit counts an IPv6 client under its prefix of this many
	// bits; default 64.
	Ipv6LimitPrefix int `koanf:"ipv6limitprefix"`
	// WriteTimeoutSeconds: a client must take each 64 KiB of an answer within it; default 30.
	WriteTimeoutSeconds int `koanf:"writetimeoutseconds"`
	// IdleTimeoutSeconds closes a keep-alive connection with no next request; default 60.
	IdleTimeoutSeconds int `koanf:"idletimeoutseconds"`
	// MaxConnectionsPerIp is the most connections open at once from one client; default 256, 0 = none.
	MaxConnectionsPerIp int `koanf:"maxconnectionsperip"`
}

// ConnectionStrings names the control database (the databases module adds its engines').
type ConnectionStrings struct {
	Control string `koanf:"control"`
}

// Redis configures the shared cache; an empty Url means in-process stores only.
type Redis struct {
	Url string `koanf:"url"`
	// KeyPrefix namespaces every key and channel of this deployment; default "prov".
	KeyPrefix string `koanf:"keyprefix"`
}

// Jwt configures access tokens (HS256).
type Jwt struct {
	Key           string `koanf:"key"`
	Issuer        string `koanf:"issuer"`
	Audience      string `koanf:"audience"`
	ExpiryMinutes int    `koanf:"expiryminutes"`
}

// Expiry is the access-token lifetime.
func (j Jwt) Expiry() time.Duration { return time.Duration(j.ExpiryMinutes) * time.Minute }

// Frontend configures CORS and redirect targets.
type Frontend struct {
	BaseUrl string   `koanf:"baseurl"`
	Origins []string `koanf:"origins"`
	// ReturnPaths are the path prefixes an OAuth returnUrl may start with (default ["/"]).
	ReturnPaths []string `koanf:"returnpaths"`
}

// Secrets holds the sealing keys (base64 of 32 bytes each).
type Secrets struct {
	EncryptionKey string   `koanf:"encryptionkey"`
	PreviousKeys  []string `koanf:"previouskeys"`
}

// Smtp configures outgoing mail; with no Host (Development only), mail is written to the log.
type Smtp struct {
	Host string `koanf:"host"`
	// Port: 0 is 587, or 465 when Security is tls.
	Port     int    `koanf:"port"`
	Username string `koanf:"username"`
	Password string `koanf:"password"`
	From     string `koanf:"from"`
	// Security is starttls (required, the default), tls (implicit TLS) or none.
	Security string `koanf:"security"`
}

// SMTP security modes (Smtp:Security).
const (
	SmtpStartTLS = "starttls"
	SmtpTLS      = "tls"
	SmtpNone     = "none"
)

// SecurityMode is Security lower-cased, SmtpStartTLS when empty.
func (s Smtp) SecurityMode() string {
	m := strings.ToLower(strings.TrimSpace(s.Security))
	if m == "" {
		return SmtpStartTLS
	}
	return m
}

// loopbackHost reports whether host names this machine: localhost or a loopback address.
func loopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.Trim(strings.TrimSpace(host), "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// Bootstrap names the admin account made sure of at startup.
type Bootstrap struct {
	AdminEmail    string `koanf:"adminemail"`
	AdminPassword string `koanf:"adminpassword"`
}

// Finisher tunes the background worker that completes in-between resource states.
type Finisher struct {
	// IntervalMillis is the polling period; default 1000.
	IntervalMillis int `koanf:"intervalmillis"`
	// MaxAttempts before a module may give a row up; default 8.
	MaxAttempts int `koanf:"maxattempts"`
	// BatchSize is the number of rows claimed per poll; default 16.
	BatchSize int `koanf:"batchsize"`
	// Disabled turns the worker off (tests that drive it by hand).
	Disabled bool `koanf:"disabled"`
}

// Ops configures the operational endpoints.
type Ops struct {
	// MetricsAllowedCidrs may read /metrics besides loopback (addresses or CIDR prefixes).
	MetricsAllowedCidrs []string `koanf:"metricsallowedcidrs"`
	// MetricsToken, when set, lets a request with Authorization: Bearer <it> read /metrics.
	MetricsToken string `koanf:"metricstoken"`
}

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error; default info.
	Level string `koanf:"level"`
}

// IsDevelopment reports whether the relaxed development checks apply.
func (c *Config) IsDevelopment() bool {
	return strings.EqualFold(c.Environment, "Development")
}

// AllowedOrigins is Frontend:Origins, or Frontend:BaseUrl's origin when none are listed.
func (c *Config) AllowedOrigins() []string {
	var out []string
	for _, o := range c.Frontend.Origins {
		if o = Origin(o); o != "" {
			out = append(out, o)
		}
	}
	if len(out) == 0 && c.Frontend.BaseUrl != "" {
		if u, err := url.Parse(c.Frontend.BaseUrl); err == nil && u.Host != "" {
			if o := Origin(u.Scheme + "://" + u.Host); o != "" {
				out = append(out, o)
			}
		}
	}
	return out
}

// Origin is s as a browser sends it in an Origin header (RFC 6454: scheme and host lower-cased,
// the scheme's default port left out; a trailing "/" is tolerated), or "" when s is not the
// origin of an http or https URL (a path, a query, user info, a wildcard).
func Origin(s string) string {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") ||
		u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" ||
		strings.Contains(u.Host, "*") {
		return ""
	}
	scheme, host, port := u.Scheme, strings.ToLower(u.Hostname()), u.Port() // url.Parse lower-cases the scheme
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}

// AbsoluteURL reports whether s is an absolute http or https URL with a host, as every base URL
// of a provider and the service's own public and frontend URLs must be.
func AbsoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https")
}

// OptionalURL is nil when s, the setting key's value, is empty or an AbsoluteURL; otherwise the
// ValidationError of key, with example as a valid value.
func OptionalURL(key, s, example string) error {
	if s == "" || AbsoluteURL(s) {
		return nil
	}
	return &ValidationError{Key: key, Reason: "must be empty or an absolute http(s) URL, e.g. " + example}
}

// ValidationError names the configuration key that stops the process.
type ValidationError struct {
	Key    string
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("configuration %s: %s", e.Key, e.Reason)
}

// Validate checks required and weak settings. Outside Development, missing or weak secrets are
// refused; the first problem is returned, naming its key.
func (c *Config) Validate() error {
	strict := !c.IsDevelopment()
	if c.Server.Port < 0 || c.Server.Port > 65535 {
		return &ValidationError{"Server:Port", "must be between 1 and 65535 (0 picks a free port)"}
	}
	if c.ConnectionStrings.Control == "" {
		return &ValidationError{"ConnectionStrings:Control", "is required"}
	}
	if c.Jwt.Key == "" {
		return &ValidationError{"Jwt:Key", "is required (at least 32 bytes)"}
	}
	if len(c.Jwt.Key) < 32 {
		return &ValidationError{"Jwt:Key", "is too short: at least 32 bytes (256 bits) are required"}
	}
	if strict && weakSecret(c.Jwt.Key) {
		return &ValidationError{"Jwt:Key", "looks like a placeholder; use a random key of at least 32 bytes"}
	}
	if c.Jwt.ExpiryMinutes <= 0 {
		return &ValidationError{"Jwt:ExpiryMinutes", "must be positive"}
	}
	if c.Secrets.EncryptionKey == "" {
		return &ValidationError{"Secrets:EncryptionKey", "is required (base64 of 32 random bytes)"}
	}
	for i, k := range append([]string{c.Secrets.EncryptionKey}, c.Secrets.PreviousKeys...) {
		b, err := base64.StdEncoding.DecodeString(k)
		name := "Secrets:EncryptionKey"
		if i > 0 {
			name = fmt.Sprintf("Secrets:PreviousKeys:%d", i-1)
		}
		if err != nil || len(b) != 32 {
			return &ValidationError{name, "must be base64 of exactly 32 bytes"}
		}
	}
	if strings.TrimSpace(c.Bootstrap.AdminEmail) != "" && !emailaddr.Valid(c.Bootstrap.AdminEmail) {
		return &ValidationError{"Bootstrap:AdminEmail", emailaddr.Message}
	}
	if c.Bootstrap.AdminEmail != "" && c.Bootstrap.AdminPassword != "" {
		// Counted as sign-in counts a password: code points of its NFKC form (the form hashed).
		pw := c.Bootstrap.AdminPassword
		n := utf8.RuneCountInString(secrets.NormalizePassword(pw))
		if strict && n < 12 {
			return &ValidationError{"Bootstrap:AdminPassword", "is too short: at least 12 characters outside Development"}
		}
		if n > secrets.MaxPasswordLen || utf8.RuneCountInString(pw) > secrets.MaxPasswordInput {
			return &ValidationError{"Bootstrap:AdminPassword", fmt.Sprintf("is too long: at most %d characters (code points of its NFKC form, "+
				"as for every account password) and %d as written", secrets.MaxPasswordLen, secrets.MaxPasswordInput)}
		}
	}
	if c.Log.Level != "" {
		var level slog.Level
		if err := level.UnmarshalText([]byte(c.Log.Level)); err != nil {
			return &ValidationError{"Log:Level", "must be debug, info, warn or error"}
		}
	}
	if !AbsoluteURL(c.Server.PublicUrl) {
		return &ValidationError{"Server:PublicUrl", "must be an absolute http or https URL, e.g. https://api.example.com"}
	}
	if !AbsoluteURL(c.Frontend.BaseUrl) {
		return &ValidationError{"Frontend:BaseUrl", "must be an absolute http or https URL, e.g. https://app.example.com"}
	}
	for i, o := range c.Frontend.Origins {
		if strings.TrimSpace(o) != "" && Origin(o) == "" {
			return &ValidationError{fmt.Sprintf("Frontend:Origins:%d", i), "must be an origin, scheme and host (and port) only, " +
				"e.g. https://app.example.com; no path, and no wildcard: CORS answers allow credentials, so each origin is listed"}
		}
	}
	for i, p := range c.Frontend.ReturnPaths {
		if !ReturnPath(p) {
			return &ValidationError{fmt.Sprintf("Frontend:ReturnPaths:%d", i), "must be a path starting with /, without //, \\, % or a . or .. segment, e.g. /app/"}
		}
	}
	for i, p := range c.Ops.MetricsAllowedCidrs {
		if _, ok := TrustedProxy(p); !ok {
			return &ValidationError{fmt.Sprintf("Ops:MetricsAllowedCidrs:%d", i), "must be an IP address or a CIDR prefix, e.g. 10.0.0.0/8"}
		}
	}
	if t := c.Ops.MetricsToken; t != "" && (len(t) < 32 || (strict && weakSecret(t))) {
		return &ValidationError{"Ops:MetricsToken", "must be at least 32 random characters (e.g. `head -c 32 /dev/urandom | base64`)"}
	}
	if c.Server.WriteTimeoutSeconds < 1 {
		return &ValidationError{"Server:WriteTimeoutSeconds", "must be at least 1"}
	}
	if c.Server.IdleTimeoutSeconds < 1 {
		return &ValidationError{"Server:IdleTimeoutSeconds", "must be at least 1"}
	}
	if c.Server.MaxConnectionsPerIp < 0 {
		return &ValidationError{"Server:MaxConnectionsPerIp", "must be 0 (no limit) or more"}
	}
	if p := c.Server.Ipv6LimitPrefix; p < 32 || p > 128 {
		return &ValidationError{"Server:Ipv6LimitPrefix", "must be between 32 and 128 (bits of an IPv6 client's address its per-IP limits count under)"}
	}
	if err := c.validateSmtp(strict); err != nil {
		return err
	}
	for i, p := range c.Server.TrustedProxies {
		if _, ok := TrustedProxy(p); !ok {
			return &ValidationError{fmt.Sprintf("Server:TrustedProxies:%d", i), "must be an IP address or a CIDR prefix, e.g. 10.0.0.0/8"}
		}
	}
	return nil
}

// ReturnPath reports whether p is a clean absolute path: it starts with '/' and has no "//", no
// backslash, no '%' (nothing encoded) and no "." or ".." segment. Frontend:ReturnPaths must be
// such paths, and so must the decoded path of a returnUrl that is kept.
func ReturnPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.Contains(p, "//") || strings.ContainsAny(p, "\\%") {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// validateSmtp refuses, outside Development, a configuration that would write mails (and the
// reset links in them) to the log, or send them in clear text over the network.
func (c *Config) validateSmtp(strict bool) error {
	switch c.Smtp.SecurityMode() {
	case SmtpStartTLS, SmtpTLS, SmtpNone:
	default:
		return &ValidationError{"Smtp:Security", "must be starttls, tls or none"}
	}
	if c.Smtp.Port < 0 || c.Smtp.Port > 65535 {
		return &ValidationError{"Smtp:Port", "must be between 1 and 65535 (0: 587, or 465 with Smtp:Security tls)"}
	}
	if !strict {
		return nil
	}
	if strings.TrimSpace(c.Smtp.Host) == "" {
		return &ValidationError{"Smtp:Host", "is required outside Development: without it mails, reset links included, are written to the log"}
	}
	if c.Smtp.SecurityMode() == SmtpNone && !loopbackHost(c.Smtp.Host) {
		return &ValidationError{"Smtp:Security", "none is refused outside Development unless Smtp:Host is a loopback address; use starttls or tls"}
	}
	return nil
}

// TrustedProxy reads one Server:TrustedProxies entry: an IP address (a prefix of its full length)
// or a CIDR prefix (masked); ok is false for anything else. An empty entry is skipped: ok and a
// zero prefix. httpx reads the setting with it, so what validates is what is used.
func TrustedProxy(s string) (p netip.Prefix, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return netip.Prefix{}, true
	}
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err == nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), true
}

// weakSecret flags obvious placeholders.
func weakSecret(s string) bool {
	l := strings.ToLower(s)
	for _, w := range []string{"changeme", "change-me", "secret", "placeholder", "example", "jwt_signing_key", "<"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	distinct := map[rune]struct{}{}
	for _, r := range s {
		distinct[r] = struct{}{}
	}
	return len(distinct) < 8
}
