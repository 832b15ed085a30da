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

// Config is the whole typed configuration. Keys are matched case-insensitively; the koanf tags are
// the lower-cased names of CONTRACT §1.
type Config struct {
	Environment        string                  `koanf:"environment"`
	Server             Server                  `koanf:"server"`
	ConnectionStrings  ConnectionStrings       `koanf:"connectionstrings"`
	Engines            map[string]EnginePublic `koanf:"engines"`
	Databases          Databases               `koanf:"databases"`
	Redis              Redis                   `koanf:"redis"`
	Jwt                Jwt                     `koanf:"jwt"`
	GitHub             GitHub                  `koanf:"github"`
	Google             OAuthClient             `koanf:"google"`
	Frontend           Frontend                `koanf:"frontend"`
	Dns                Dns                     `koanf:"dns"`
	WfautoProvisioning Wfauto                  `koanf:"wfautoprovisioning"`
	Ai                 Ai                      `koanf:"ai"`
	AiKeys             AiKeys                  `koanf:"aikeys"`
	Secrets            Secrets                 `koanf:"secrets"`
	Smtp               Smtp                    `koanf:"smtp"`
	Bootstrap          Bootstrap               `koanf:"bootstrap"`
	RateLimit          map[string]string       `koanf:"ratelimit"`
	Finisher           Finisher                `koanf:"finisher"`
	Log                Log                     `koanf:"log"`
	Auth               Auth                    `koanf:"auth"`
}

// Server holds the listener settings.
type Server struct {
	Port           int      `koanf:"port"`
	PublicUrl      string   `koanf:"publicurl"`
	TrustedProxies []string `koanf:"trustedproxies"`
	// ShutdownTimeoutSeconds bounds graceful shutdown, after which open connections are closed;
	// default 10 (under fx's 15 s stop timeout).
	ShutdownTimeoutSeconds int `koanf:"shutdowntimeoutseconds"`
}

// ConnectionStrings names the control database and the tenant engines' admin connections.
type ConnectionStrings struct {
	Control        string `koanf:"control"`
	TenantPostgres string `koanf:"tenantpostgres"`
	TenantMysql    string `koanf:"tenantmysql"`
}

// EnginePublic is the host and port shown to users for one engine; empty means those of the admin connection.
type EnginePublic struct {
	PublicHost string `koanf:"publichost"`
	PublicPort int    `koanf:"publicport"`
}

// Databases holds the tenant database quotas.
type Databases struct {
	MaxPerUser           int   `koanf:"maxperuser"`
	DefaultMaxSpaceBytes int64 `koanf:"defaultmaxspacebytes"`
	// DefaultEngine is the engine used when a request names none; default "postgres".
	DefaultEngine string `koanf:"defaultengine"`
	// UsageRefreshSeconds is how often used space is read from the engines; default 30.
	UsageRefreshSeconds int `koanf:"usagerefreshseconds"`
	// MaxConnectionsPerRole is how many sessions each tenant login role (a database's own and
	// each access credential's) may have open at once; 0 = no limit. Default 10.
	MaxConnectionsPerRole int `koanf:"maxconnectionsperrole"`
	// MaxEngineWaits is how many requests of this process may wait for a tenant engine at once
	// while holding a control database connection (a create, pause, resume or delete of a
	// database, a change of an access credential); one more is 503 with Retry-After, having
	// stored nothing. It keeps a hung engine from taking the control pool (32 connections) that
	// every route needs. Default 8; 1 to 16.
	MaxEngineWaits int `koanf:"maxenginewaits"`
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

// OAuthClient holds the credentials of one external identity provider.
type OAuthClient struct {
	ClientId     string `koanf:"clientid"`
	ClientSecret string `koanf:"clientsecret"`
}

// Configured reports whether both credentials are set.
func (o OAuthClient) Configured() bool { return o.ClientId != "" && o.ClientSecret != "" }

// GitHub adds endpoint overrides (GitHub Enterprise Server, tests) to the OAuth credentials.
type GitHub struct {
	OAuthClient `koanf:",squash"`
	AuthUrl     string `koanf:"authurl"`
	TokenUrl    string `koanf:"tokenurl"`
	ProfileUrl  string `koanf:"profileurl"`
	EmailUrl    string `koanf:"emailurl"`
}

// Frontend configures CORS and redirect targets.
type Frontend struct {
	BaseUrl string   `koanf:"baseurl"`
	Origins []string `koanf:"origins"`
}

// Dns configures the DNS cell (Cloudflare v4 API).
type Dns struct {
	BaseUrl           string `koanf:"baseurl"`
	ZoneId            string `koanf:"zoneid"`
	ZoneName          string `koanf:"zonename"`
	CellSubdomain     string `koanf:"cellsubdomain"`
	ApiToken          string `koanf:"apitoken"`
	DefaultContent    string `koanf:"defaultcontent"`
	RecordTtl         int    `koanf:"recordttl"`
	Proxied           bool   `koanf:"proxied"`
	MaxRecordsPerUser int    `koanf:"maxrecordsperuser"`
	// TimeoutSeconds bounds each provider call whole, its retries included (a timed-out try is
	// not repeated within the call); default 10.
	TimeoutSeconds int `koanf:"timeoutseconds"`
	// OutboundRate is our own budget of provider calls, shared across replicas, in the RateLimit
	// format; default "200-M" (below the provider's 1,200 per 5 minutes).
	OutboundRate string `koanf:"outboundrate"`
}

// Enabled reports whether the DNS cell is configured: a zone id, an API token and a base URL.
func (d Dns) Enabled() bool { return d.ZoneId != "" && d.ApiToken != "" && d.BaseUrl != "" }

// ValidZoneName reports whether s is a DNS zone name: at least two labels of a-z, 0-9 and '-'
// (1–63 characters, no hyphen at either end), at most 253 characters; a trailing dot is allowed.
func ValidZoneName(s string) bool {
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	return strings.Contains(s, ".") && validLabels(s)
}

// validCellSubdomain reports whether sub (its dots at either end ignored, any case) is one or more
// labels under zone that leave room for a record's label: label.sub.zone is at most 253
// characters. It must not end with the zone itself: the zone is appended to it, and the provider
// takes a name that ends with the zone as complete (cell.example.com would name records
// x.cell.example.com there, shown and looked up as x.cell.example.com.example.com).
func validCellSubdomain(sub, zone string) bool {
	sub = strings.ToLower(strings.Trim(sub, "."))
	zone = strings.ToLower(strings.TrimSuffix(zone, "."))
	return validLabels(sub) && sub != zone && !strings.HasSuffix(sub, "."+zone) && len(sub)+len(zone) <= 250
}

// validLabels reports whether s (lower case) is dot-separated labels of a-z, 0-9 and '-' (1–63
// characters, no hyphen at either end), at most 253 characters.
func validLabels(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' || strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
	}
	return true
}

// ValidRecordIPv4 reports whether s is an IPv4 address in dotted-decimal form that is routable as
// a host address: not in 0.0.0.0/8 ("this network", 0.0.0.0 included), loopback, link-local,
// multicast or 240.0.0.0/4 (reserved, 255.255.255.255 included). Private ranges (10/8,
// 172.16/12, 192.168/16, 100.64/10) are allowed: a cell may point at a private network. The DNS
// module checks a record's content with it (dns.ValidContent), and Validate Dns:DefaultContent.
func ValidRecordIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is4() || a.String() != s {
		return false
	}
	b := a.As4()
	return !(b[0] == 0 || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() || b[0] >= 240)
}

// Wfauto configures the external workflow-automation provisioning cell.
type Wfauto struct {
	BaseUrl        string `koanf:"baseurl"`
	ApiKey         string `koanf:"apikey"`
	TimeoutSeconds int    `koanf:"timeoutseconds"`
}

// Ai configures the OpenAI-compatible generation upstream.
type Ai struct {
	BaseUrl        string `koanf:"baseurl"`
	ApiKey         string `koanf:"apikey"`
	DefaultModel   string `koanf:"defaultmodel"`
	TimeoutSeconds int    `koanf:"timeoutseconds"`
}

// AiKeys holds the AI key quota.
type AiKeys struct {
	MaxPerUser int `koanf:"maxperuser"`
}

// Secrets holds the sealing keys (base64 of 32 bytes each).
type Secrets struct {
	EncryptionKey string   `koanf:"encryptionkey"`
	PreviousKeys  []string `koanf:"previouskeys"`
}

// Smtp configures outgoing mail; with no Host, mail is written to the log.
type Smtp struct {
	Host     string `koanf:"host"`
	Port     int    `koanf:"port"`
	Username string `koanf:"username"`
	Password string `koanf:"password"`
	From     string `koanf:"from"`
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

// Log configures logging.
type Log struct {
	// Level is debug, info, warn or error; default info.
	Level string `koanf:"level"`
}

// ---- Auth: the auth module's settings (sessions, the second factor, the sign-in lockout). ----

// Auth configures sign-in sessions, TOTP and the lockout of modules/auth.
type Auth struct {
	// RefreshDays is how long a refresh token stays valid, counted from its session's last
	// refresh (sliding); default 30.
	RefreshDays int `koanf:"refreshdays"`
	// RefreshReuseSeconds is how long after its rotation a spent refresh token still answers its
	// successor (two tabs refreshing at once); later, presenting it ends the session. Default 10.
	RefreshReuseSeconds int `koanf:"refreshreuseseconds"`
	// StepUpMinutes is how long a passed second factor allows revealing a database password, for
	// a user with TOTP on; default 10.
	StepUpMinutes int `koanf:"stepupminutes"`
	// LockoutThreshold is the number of failed checks (passwords per account, TOTP codes per
	// user) after which further attempts wait an exponentially growing delay; default 10.
	LockoutThreshold int `koanf:"lockoutthreshold"`
	// LockoutWindowMinutes is how long failed checks are remembered after the last one; default 15.
	LockoutWindowMinutes int `koanf:"lockoutwindowminutes"`
	// LockoutDelaySeconds is the wait after the threshold's failure; it doubles with each further
	// failure, up to LockoutWindowMinutes. Default 1.
	LockoutDelaySeconds int `koanf:"lockoutdelayseconds"`
	// TotpIssuer names the service in authenticator apps (the otpauth:// URI's issuer); default
	// "Provisioner".
	TotpIssuer string `koanf:"totpissuer"`
}

// RefreshTTL is Auth:RefreshDays as a duration.
func (a Auth) RefreshTTL() time.Duration { return time.Duration(a.RefreshDays) * 24 * time.Hour }

// validate checks the Auth section; the first problem names its key.
func (a Auth) validate() error {
	switch {
	case a.RefreshDays < 1 || a.RefreshDays > 365:
		return &ValidationError{"Auth:RefreshDays", "must be between 1 and 365"}
	case a.RefreshReuseSeconds < 0 || a.RefreshReuseSeconds > 300:
		return &ValidationError{"Auth:RefreshReuseSeconds", "must be between 0 and 300"}
	case a.StepUpMinutes < 1 || a.StepUpMinutes > 1440:
		return &ValidationError{"Auth:StepUpMinutes", "must be between 1 and 1440"}
	case a.LockoutThreshold < 1 || a.LockoutThreshold > 1_000_000:
		return &ValidationError{"Auth:LockoutThreshold", "must be between 1 and 1000000"}
	case a.LockoutWindowMinutes < 1 || a.LockoutWindowMinutes > 1440:
		return &ValidationError{"Auth:LockoutWindowMinutes", "must be between 1 and 1440"}
	case a.LockoutDelaySeconds < 1 || a.LockoutDelaySeconds > 3600:
		return &ValidationError{"Auth:LockoutDelaySeconds", "must be between 1 and 3600"}
	case strings.TrimSpace(a.TotpIssuer) == "" || strings.Contains(a.TotpIssuer, ":"):
		return &ValidationError{"Auth:TotpIssuer", "must be a non-empty name without ':' (authenticator apps split the label at it)"}
	}
	return nil
}

// ---- end of Auth ----

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

// absoluteURL reports whether s is an absolute http or https URL with a host.
func absoluteURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https")
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
	if c.Databases.MaxPerUser < 0 {
		return &ValidationError{"Databases:MaxPerUser", "must not be negative"}
	}
	if c.Databases.MaxConnectionsPerRole < 0 {
		return &ValidationError{"Databases:MaxConnectionsPerRole", "must not be negative (0 = no limit)"}
	}
	if c.Databases.MaxEngineWaits < 1 || c.Databases.MaxEngineWaits > 16 {
		return &ValidationError{"Databases:MaxEngineWaits", "must be between 1 and 16 (the control database pool has 32 connections, which every route needs)"}
	}
	if c.Databases.DefaultMaxSpaceBytes <= 0 {
		return &ValidationError{"Databases:DefaultMaxSpaceBytes", "must be positive"}
	}
	// 0 does not mean "no limit": the AI client gives up at once (every call a 502 upstream_timeout), and
	// the cell's client would wait for ever, holding a finisher's row transaction.
	if c.Ai.TimeoutSeconds < 1 {
		return &ValidationError{"Ai:TimeoutSeconds", "must be at least 1 (seconds)"}
	}
	if c.WfautoProvisioning.TimeoutSeconds < 1 {
		return &ValidationError{"WfautoProvisioning:TimeoutSeconds", "must be at least 1 (seconds)"}
	}
	if c.Log.Level != "" {
		var level slog.Level
		if err := level.UnmarshalText([]byte(c.Log.Level)); err != nil {
			return &ValidationError{"Log:Level", "must be debug, info, warn or error"}
		}
	}
	if c.Dns.RecordTtl != 1 && (c.Dns.RecordTtl < 60 || c.Dns.RecordTtl > 86400) {
		return &ValidationError{"Dns:RecordTtl", "must be 1 (automatic) or between 60 and 86400"}
	}
	if c.Dns.Enabled() && !ValidZoneName(c.Dns.ZoneName) {
		return &ValidationError{"Dns:ZoneName", "must be the zone's name (e.g. example.com) when the DNS cell is configured (Dns:ZoneId, Dns:ApiToken)"}
	}
	if c.Dns.Enabled() && strings.Trim(c.Dns.CellSubdomain, ".") != "" && !validCellSubdomain(c.Dns.CellSubdomain, c.Dns.ZoneName) {
		return &ValidationError{"Dns:CellSubdomain", "must be empty or one or more DNS labels under Dns:ZoneName, without the zone's name " +
			"(e.g. cell for records label.cell.example.com), leaving room for a record's label (253 characters in all)"}
	}
	if c.Dns.DefaultContent != "" && !ValidRecordIPv4(c.Dns.DefaultContent) {
		return &ValidationError{"Dns:DefaultContent", "must be empty or an IPv4 address a record may point at (not 0.0.0.0/8, loopback, link-local, multicast or 240.0.0.0/4)"}
	}
	if !absoluteURL(c.Server.PublicUrl) {
		return &ValidationError{"Server:PublicUrl", "must be an absolute http or https URL, e.g. https://api.example.com"}
	}
	if !absoluteURL(c.Frontend.BaseUrl) {
		return &ValidationError{"Frontend:BaseUrl", "must be an absolute http or https URL, e.g. https://app.example.com"}
	}
	for i, o := range c.Frontend.Origins {
		if strings.TrimSpace(o) != "" && Origin(o) == "" {
			return &ValidationError{fmt.Sprintf("Frontend:Origins:%d", i), "must be an origin, scheme and host (and port) only, " +
				"e.g. https://app.example.com; no path, and no wildcard: CORS answers allow credentials, so each origin is listed"}
		}
	}
	if err := c.Auth.validate(); err != nil {
		return err
	}
	for i, p := range c.Server.TrustedProxies {
		if _, ok := TrustedProxy(p); !ok {
			return &ValidationError{fmt.Sprintf("Server:TrustedProxies:%d", i), "must be an IP address or a CIDR prefix, e.g. 10.0.0.0/8"}
		}
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
