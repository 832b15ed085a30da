package databases

import "provisioner/platform/config"

// Config is the databases module's configuration section: the tenant engines' admin connections
// (ConnectionStrings:TenantPostgres, ConnectionStrings:TenantMysql, beside the platform's
// Control), what users are shown of them (Engines:*) and the quotas (Databases:*).
type Config struct {
	ConnectionStrings TenantConnections       `koanf:"connectionstrings"`
	Engines           map[string]EnginePublic `koanf:"engines"`
	Databases         DatabasesConfig         `koanf:"databases"`
}

// TenantConnections are the admin connections of the tenant engines; empty turns one off.
type TenantConnections struct {
	TenantPostgres string `koanf:"tenantpostgres"`
	TenantMysql    string `koanf:"tenantmysql"`
}

// EnginePublic is the host and port shown to users for one engine; empty means those of the admin connection.
type EnginePublic struct {
	PublicHost string `koanf:"publichost"`
	PublicPort int    `koanf:"publicport"`
}

// DatabasesConfig holds the tenant database quotas.
type DatabasesConfig struct {
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
	// RecoveryHours is how long a deleted database stays recoverable (logins refused, kept on its
	// engine) before the finisher drops it; 0 drops it at once. Default 72.
	RecoveryHours int `koanf:"recoveryhours"`
	// RotationGraceSeconds is how long the old password of a scheduled rotation (rotationDays)
	// keeps working; 0 to 86400. Default 3600.
	RotationGraceSeconds int `koanf:"rotationgraceseconds"`
}

// Settings declares the section: its defaults and the documentation of its keys.
var Settings = &config.Section[Config]{
	Defaults: Config{
		ConnectionStrings: TenantConnections{TenantPostgres: "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"},
		Databases: DatabasesConfig{MaxPerUser: 3, DefaultMaxSpaceBytes: 536870912, DefaultEngine: "postgres",
			UsageRefreshSeconds: 30, MaxConnectionsPerRole: 10, MaxEngineWaits: 8,
			RotationGraceSeconds: 3600, RecoveryHours: 72},
	},
	Doc: map[string]string{
		"ConnectionStrings:TenantPostgres": "admin connection to the PostgreSQL server hosting tenant databases",
		"ConnectionStrings:TenantMysql": "admin DSN of a MySQL/MariaDB server for tenant databases, e.g. " +
			"root@tcp(127.0.0.1:3306)/; empty turns the engine off",
		"Engines":                        "Host and port shown to users per engine (default: those of the admin connection).",
		"Databases:DefaultMaxSpaceBytes": "512 MiB",
		"Databases:DefaultEngine": "used when a request names no engine; when it is not configured, the first configured " +
			"engine; with none configured there is no default and a registration gets no first database (nothing logged)",
		"Databases:UsageRefreshSeconds":   "used space is read from the engines this often",
		"Databases:MaxConnectionsPerRole": "sessions each tenant login role may have open at once; 0 = no limit",
		"Databases:MaxEngineWaits": "requests of one process that may wait for an engine at once (each holds a control " +
			"database connection meanwhile); one more is 503 with `Retry-After`, having stored nothing; 1 to 16 (see databases)",
		"Databases:RecoveryHours": "a deleted database stays recoverable this long (logins refused, restorable with " +
			"`POST /api/me/databases/{id}/restore`), then it is dropped; 0 = dropped at once; 0 to 8760",
		"Databases:RotationGraceSeconds": "how long the old password keeps working after a scheduled rotation (a database's " +
			"`rotationDays`); 0 to 86400",
	},
	Maps: map[string]config.MapDoc{
		"Engines": {Placeholder: "<engine>", Entries: []config.MapEntry{{Name: "postgres"}, {Name: "mysql"}}},
	},
}

// Validate implements config.Validator.
func (c Config) Validate() error {
	d := c.Databases
	if d.MaxPerUser < 0 {
		return &config.ValidationError{Key: "Databases:MaxPerUser", Reason: "must not be negative"}
	}
	if d.MaxConnectionsPerRole < 0 {
		return &config.ValidationError{Key: "Databases:MaxConnectionsPerRole", Reason: "must not be negative (0 = no limit)"}
	}
	if d.MaxEngineWaits < 1 || d.MaxEngineWaits > 16 {
		return &config.ValidationError{Key: "Databases:MaxEngineWaits", Reason: "must be between 1 and 16 (the control database pool has 32 connections, which every route needs)"}
	}
	if d.RecoveryHours < 0 || d.RecoveryHours > maxRecoveryHours {
		return &config.ValidationError{Key: "Databases:RecoveryHours", Reason: "must be between 0 (no recovery window) and 8760 (a year)"}
	}
	if d.RotationGraceSeconds < 0 || d.RotationGraceSeconds > MaxGraceSeconds {
		return &config.ValidationError{Key: "Databases:RotationGraceSeconds", Reason: "must be between 0 and 86400"}
	}
	if d.DefaultMaxSpaceBytes <= 0 {
		return &config.ValidationError{Key: "Databases:DefaultMaxSpaceBytes", Reason: "must be positive"}
	}
	return nil
}
