// Package redisx opens the optional shared Redis client. With no Redis:Url the service runs with
// in-process stores (one replica); with one, Redis being down never stops startup: the users of
// the client (rate limits, key revocation) degrade and recover on their own.
package redisx

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Open returns nil for an empty url.
func Open(url string) (*redis.Client, error) {
	if url == "" {
		return nil, nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse Redis:Url: %w", err)
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
