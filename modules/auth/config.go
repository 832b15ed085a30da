package auth

import (
	"strings"
	"time"

	"provisioner/platform/config"
)

// Config is the auth module's configuration section: the identity providers, GitHub:* and
// Google:*, and the sessions, second factor and lockout, Auth:*.
type Config struct {
	GitHub GitHub       `koanf:"github"`
	Google OAuthClient  `koanf:"google"`
	Auth   AuthSettings `koanf:"auth"`
}

// Validate implements config.Validator.
func (c Config) Validate() error { return c.Auth.validate() }

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

// Settings declares the section: its defaults and the documentation of its keys.
var Settings = &config.Section[Config]{
	Defaults: Config{Auth: AuthSettings{RefreshDays: 30, RefreshReuseSeconds: 10, StepUpMinutes: 10, LockoutThreshold: 10,
		LockoutWindowMinutes: 15, LockoutDelaySeconds: 1, TotpIssuer: "Provisioner"}},
	Doc: map[string]string{
		"Auth:RefreshDays":          "a refresh token's validity, from its session's last refresh (sliding); 1 to 365",
		"Auth:RefreshReuseSeconds":  "a spent refresh token still answers its successor this long (tabs racing); later it ends the session; 0 to 300",
		"Auth:StepUpMinutes":        "with TOTP on, revealing a database password needs a second factor passed this recently; 1 to 1440",
		"Auth:LockoutThreshold":     "failed password checks (per account) or TOTP codes (per user) before each further attempt waits a doubling delay (429)",
		"Auth:LockoutWindowMinutes": "failed checks are forgotten this long after the last one",
		"Auth:LockoutDelaySeconds":  "the wait after the threshold's failure; doubles with each further one, up to LockoutWindowMinutes",
		"Auth:TotpIssuer":           "the service's name in authenticator apps; no ':'",
		"GitHub:AuthUrl":            "default https://github.com/login/oauth/authorize (GitHub Enterprise Server: override)",
		"GitHub:TokenUrl":           "default https://github.com/login/oauth/access_token",
		"GitHub:ProfileUrl":         "default https://api.github.com/user",
		"GitHub:EmailUrl":           "default https://api.github.com/user/emails",
	},
}

// AuthSettings configures sign-in sessions, TOTP and the sign-in lockout: the keys Auth:*.
type AuthSettings struct {
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
func (a AuthSettings) RefreshTTL() time.Duration {
	return time.Duration(a.RefreshDays) * 24 * time.Hour
}

// validate checks the Auth section; the first problem names its key.
func (a AuthSettings) validate() error {
	switch {
	case a.RefreshDays < 1 || a.RefreshDays > 365:
		return &config.ValidationError{Key: "Auth:RefreshDays", Reason: "must be between 1 and 365"}
	case a.RefreshReuseSeconds < 0 || a.RefreshReuseSeconds > 300:
		return &config.ValidationError{Key: "Auth:RefreshReuseSeconds", Reason: "must be between 0 and 300"}
	case a.StepUpMinutes < 1 || a.StepUpMinutes > 1440:
		return &config.ValidationError{Key: "Auth:StepUpMinutes", Reason: "must be between 1 and 1440"}
	case a.LockoutThreshold < 1 || a.LockoutThreshold > 1_000_000:
		return &config.ValidationError{Key: "Auth:LockoutThreshold", Reason: "must be between 1 and 1000000"}
	case a.LockoutWindowMinutes < 1 || a.LockoutWindowMinutes > 1440:
		return &config.ValidationError{Key: "Auth:LockoutWindowMinutes", Reason: "must be between 1 and 1440"}
	case a.LockoutDelaySeconds < 1 || a.LockoutDelaySeconds > 3600:
		return &config.ValidationError{Key: "Auth:LockoutDelaySeconds", Reason: "must be between 1 and 3600"}
	case strings.TrimSpace(a.TotpIssuer) == "" || strings.Contains(a.TotpIssuer, ":"):
		return &config.ValidationError{Key: "Auth:TotpIssuer", Reason: "must be a non-empty name without ':' (authenticator apps split the label at it)"}
	}
	return nil
}
