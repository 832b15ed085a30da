// Package redisx opens the optional shared Redis client. With no Redis:Url the service runs with
// in-process stores (one replica); with one, Redis being down never stops startup: the users of
// the client (the rate limits) degrade and recover on their own.
package redisx

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"provisioner/platform/config"
)

// errBadURL does not say more: go-redis and net/url quote what they could not parse, and with an
// unencoded '/', '?' or '#' in the password that is the password.
// It is the setting's own configuration error ("configuration Redis:Url: …"), as Load's are.
var errBadURL = &config.ValidationError{Key: "Redis:Url", Reason: "is not a valid redis:// or rediss:// URL " +
	"(redis://[user:password@]host:port/db; percent-encode special characters in the password)"}

// go-redis logs some failures itself (a dial that failed all its attempts, a pool hook's error)
// through a package-wide logger that writes plain "redis: …" lines to stderr; the service's logs are
// JSON, so those lines go through slog's default logger (set by the app) as WARN records instead.
func init() { redis.SetLogger(slogLogger{}) }

type slogLogger struct{}

func (slogLogger) Printf(ctx context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	slog.Default().WarnContext(ctx, "redis client: "+msg)
}

// Open returns nil for an empty url.
func Open(url string) (*redis.Client, error) {
	if url == "" {
		return nil, nil
	}
	if strings.Contains(url, "#") { // a fragment: part of the URL (maybe the host) was cut off
		return nil, errBadURL
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, errBadURL
	}
	opts.DialTimeout = 2 * time.Second
	opts.ReadTimeout = time.Second
	opts.WriteTimeout = time.Second
	opts.PoolTimeout = 2 * time.Second
	opts.MaxRetries = 1
	return redis.NewClient(opts), nil
}

// Ping reports whether c answers (true for a nil client: nothing to depend on).
func Ping(ctx context.Context, c *redis.Client) error {
	if c == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}
