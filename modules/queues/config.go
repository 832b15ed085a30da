package queues

import (
	"net"
	"net/url"

	"provisioner/platform/config"
)

// Config is the queues module's configuration section, Queues:* (the RabbitMQ broker that hosts
// the tenants' virtual hosts, reached through its management HTTP API).
type Config struct {
	ManagementUrl  string `koanf:"managementurl"`
	Username       string `koanf:"username"`
	Password       string `koanf:"password"`
	AmqpHost       string `koanf:"amqphost"`
	AmqpPort       int    `koanf:"amqpport"`
	MaxPerUser     int    `koanf:"maxperuser"`
	MaxConnections int    `koanf:"maxconnections"`
	MaxQueues      int    `koanf:"maxqueues"`
	TimeoutSeconds int    `koanf:"timeoutseconds"`
}

// Settings declares the section: its defaults and the documentation of its keys.
var Settings = &config.Section[Config]{
	Key:      "Queues",
	Defaults: Config{AmqpPort: 5672, MaxPerUser: 2, MaxConnections: 20, MaxQueues: 100, TimeoutSeconds: 10},
	Doc: map[string]string{
		"ManagementUrl":  "RabbitMQ management API, e.g. http://127.0.0.1:15672; empty turns queue spaces off (their routes answer 503)",
		"Username":       "a management user with the administrator tag",
		"Password":       "secret",
		"AmqpHost":       "host shown to users in amqpUrl; default the ManagementUrl's host",
		"AmqpPort":       "port shown to users in amqpUrl",
		"MaxPerUser":     "queue spaces per user",
		"MaxConnections": "connections each queue space may have open at once (a vhost limit)",
		"MaxQueues":      "queues each queue space may hold (a vhost limit)",
		"TimeoutSeconds": "bounds each management API call; at least 1",
	},
}

// Enabled reports whether a broker is configured.
func (c Config) Enabled() bool { return c.ManagementUrl != "" }

// amqpHost is the host users connect to.
func (c Config) amqpHost() string {
	if c.AmqpHost != "" {
		return c.AmqpHost
	}
	if u, err := url.Parse(c.ManagementUrl); err == nil && u.Hostname() != "" {
		return u.Hostname()
	}
	return "localhost"
}

// Validate implements config.Validator.
func (c Config) Validate() error {
	bad := func(key, reason string) error { return &config.ValidationError{Key: "Queues:" + key, Reason: reason} }
	if err := config.OptionalURL("Queues:ManagementUrl", c.ManagementUrl, "http://127.0.0.1:15672"); err != nil {
		return err
	}
	if c.ManagementUrl != "" {
		if c.Username == "" {
			return bad("Username", "is required once Queues:ManagementUrl is set")
		}
	}
	if c.AmqpHost != "" && net.ParseIP(c.AmqpHost) == nil && !validHost(c.AmqpHost) {
		return bad("AmqpHost", "must be a host name or an IP address")
	}
	switch {
	case c.AmqpPort < 1 || c.AmqpPort > 65535:
		return bad("AmqpPort", "must be from 1 to 65535")
	case c.MaxPerUser < 1:
		return bad("MaxPerUser", "must be at least 1")
	case c.MaxConnections < 1:
		return bad("MaxConnections", "must be at least 1")
	case c.MaxQueues < 1:
		return bad("MaxQueues", "must be at least 1")
	case c.TimeoutSeconds < 1:
		return bad("TimeoutSeconds", "must be at least 1 (seconds)")
	}
	return nil
}

// validHost accepts a DNS name: letters, digits, '-' and '.', at most 253 characters.
func validHost(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
			return false
		}
	}
	return true
}
