package config

// Platform is the section of the keys the platform itself reads (CONTRACT §1): Load always fills it.
var Platform = &Section[Config]{
	Defaults: Config{
		Environment: "Production",
		Server: Server{Port: 5133, PublicUrl: "http://localhost:5133", ShutdownTimeoutSeconds: 10, Ipv6LimitPrefix: 64,
			WriteTimeoutSeconds: 30, IdleTimeoutSeconds: 60, MaxConnectionsPerIp: 256},
		ConnectionStrings: ConnectionStrings{
			Control: "postgres://postgres@127.0.0.1:5432/provisioner?sslmode=disable",
		},
		Redis:    Redis{KeyPrefix: "prov"},
		Jwt:      Jwt{Issuer: "provisioner", Audience: "provisioner-clients", ExpiryMinutes: 60},
		Frontend: Frontend{BaseUrl: "http://localhost:5173", ReturnPaths: []string{"/"}},
		Smtp:     Smtp{From: "no-reply@localhost", Security: SmtpStartTLS},
		Finisher: Finisher{IntervalMillis: 1000, MaxAttempts: 8, BatchSize: 16},
		Log:      Log{Level: "info"},
	},
	Doc: map[string]string{
		"Environment": "Development relaxes secret checks for local work; Production (the default) refuses weak or missing " +
			"secrets. ASPNETCORE_ENVIRONMENT is honoured too.",
		"Server:Port":                   "0 picks a free port",
		"Server:PublicUrl":              "the address clients use (an absolute http(s) URL); OAuth callbacks are built from it",
		"Server:TrustedProxies":         "addresses/CIDRs whose X-Forwarded-For is believed; anything else stops the process, naming the item",
		"Server:ShutdownTimeoutSeconds": "then remaining connections are closed",
		"Server:WriteTimeoutSeconds": "a client must take each 64 KiB of an answer within this; else its connection is " +
			"reset (slow or non-reading clients; a streamed answer is not cut while its client reads)",
		"Server:IdleTimeoutSeconds": "a keep-alive connection that sends no next request within this is closed",
		"Server:MaxConnectionsPerIp": "connections open at once from one client address (an IPv6 client's Ipv6LimitPrefix); " +
			"past it a connection is reset as it is accepted. 0 = no limit; Server:TrustedProxies are exempt",
		"Server:Ipv6LimitPrefix": "every per-IP limit (rate limits, connections) counts an IPv6 client under its prefix of this " +
			"many bits (32–128): a /64 is one subscriber, who may use any of its addresses",
		"ConnectionStrings:Control": "control database; created when missing if the role may. URLs here and in Redis:Url need " +
			"special characters of a password percent-encoded (/ as %2F, # as %23, ? as %3F, @ as %40); a malformed URL is " +
			"refused at startup with a hint that repeats none of it",
		"Redis:Url":        "e.g. redis://127.0.0.1:6379/0; empty = in-process stores (one replica)",
		"Redis:KeyPrefix":  "namespaces keys and channels of this deployment",
		"Jwt:Key":          "REQUIRED: at least 32 random bytes (e.g. `head -c 48 /dev/urandom | base64`)",
		"Frontend:BaseUrl": "OAuth and reset links point here (an absolute http(s) URL)",
		"Frontend:Origins": "CORS origins; default = the origin of BaseUrl. Each is scheme://host[:port], no path and no `*` " +
			"(answers allow credentials): anything else stops the process, naming the item",
		"Frontend:ReturnPaths": "an OAuth returnUrl on an allowed origin is kept only if its decoded path starts with one of " +
			"these (whole segments) and has no encoded slash or backslash, no . or .. segment and no //; else the sign-in lands " +
			"on {BaseUrl}/auth/callback",
		"Secrets:EncryptionKey": "REQUIRED: base64 of 32 random bytes (`head -c 32 /dev/urandom | base64`)",
		"Secrets:PreviousKeys":  "older keys still accepted for decryption after a rotation",
		"Smtp:Host":             "REQUIRED outside Development; empty (Development only): mails, reset links included, are written to the log",
		"Smtp:Port":             "0: 587, or 465 when Smtp:Security is tls",
		"Smtp:Security": "starttls: STARTTLS required, a server not offering it is an error; tls: implicit TLS (port 465); " +
			"none: clear text, refused outside Development unless Smtp:Host is a loopback address",
		"Smtp:Password": "secret",
		"Bootstrap:AdminEmail": "made sure of at startup: created if missing, promoted to Admin if not; except that an account " +
			"an Admin deleted or demoted stays so while another Admin exists (one WARN line says why it was skipped); a bare " +
			"address (`admin@example.com`, no display name)",
		"Bootstrap:AdminPassword": "used only when the account is created; 12–128 characters (code points of its NFKC form, " +
			"at most 512 as written) outside Development, at most 128 in it",
		"RateLimit":               "Rates as N-S, N-M, N-H or N-D (per second/minute/hour/day); a name that is none of these stops the process.",
		"Finisher:IntervalMillis": "background worker polling period",
		"Finisher:MaxAttempts":    "attempts before a resource is given up (Failed)",
		"Finisher:Disabled":       "turns the background worker off (tests that drive it by hand)",
		"Log:Level":               "debug, info, warn, error",
		"Ops:MetricsAllowedCidrs": "addresses/CIDRs that may read /metrics besides loopback (a request relayed by a proxy is " +
			"not loopback); everyone else gets 404",
		"Ops:MetricsToken": "secret; when set, `Authorization: Bearer <token>` reads /metrics from anywhere (at least 32 characters)",
	},
	Maps: map[string]MapDoc{
		// The defaults are ratelimit.DefaultRates (app's tests keep both the same).
		"RateLimit": {Entries: []MapEntry{
			{Name: "PerIp", Default: "300-M", Doc: "every route, per client IP"},
			{Name: "PerUser", Default: "600-M", Doc: "authenticated routes, per user"},
			{Name: "Login", Default: "10-M", Doc: "per IP and email"},
			{Name: "LoginPerIp", Default: "30-M", Doc: "sign-in attempts per client IP, whatever the email, failed and successful alike (password spraying)"},
			{Name: "Register", Default: "5-M", Doc: "per IP"},
			{Name: "ForgotPassword", Default: "3-H", Doc: "reset mails per email, silent: past it forgot-password still " +
				"answers the same 200 and mails nothing (a stranger spending it gets no 429 and learns nothing; the owner then " +
				"has the links it mailed, each valid 30 min, but no new one until the hour's window moves on)"},
			{Name: "ForgotPasswordPerIp", Default: "20-H", Doc: "forgot-password per client IP; this one answers 429 with `Retry-After`"},
			{Name: "PasswordReveal", Default: "5-M", Doc: "per user"},
			{Name: "AiGenerate", Default: "60-M", Doc: "per AI key"},
			{Name: "Provision", Default: "30-M", Doc: "per user: the state-changing routes of databases, dns, wfauto and AI keys"},
		}},
	},
}
