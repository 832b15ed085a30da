package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"provisioner/platform/config"
	"provisioner/platform/ratelimit"
)

// Budget is a provider's outbound call budget, shared by replicas through Redis: a call waits for
// it up to MaxWait, waiting calls served a user at a time in turn (ratelimit.Outbound); past that
// the call is put off as a Deferred (not a failed attempt: the Finisher tries it again when the
// budget resets), so nothing bursts into the provider's own limit.
type Budget struct {
	Name    string // the limit's name ("DnsOutbound")
	Prefix  string // its Redis keys' namespace under Redis:KeyPrefix ("dns")
	Setting string // the configuration key of Rate ("Dns:OutboundRate"), named when Rate is bad
	Rate    string // in the RateLimit format ("200-M")
	Scope   string // what one budget is shared by (the zone's id)
	What    string // the budget in errors ("DNS outbound budget")
	MaxWait time.Duration
}

// Take builds the budget's gate, asked before every call; rc nil keeps the budget in memory.
func (b Budget) Take(platform *config.Config, rc *redis.Client, log *slog.Logger) (func(context.Context) error, error) {
	opts := ratelimit.Options{Prefix: platform.Redis.KeyPrefix + ":" + b.Prefix, Rates: map[string]string{b.Name: b.Rate}, Logger: log}
	if rc != nil {
		opts.Redis = rc
	}
	limiter, err := ratelimit.New(opts)
	var re *ratelimit.RateError
	if errors.As(err, &re) {
		return nil, &config.ValidationError{Key: b.Setting, Reason: re.Reason()}
	} else if err != nil {
		return nil, &config.ValidationError{Key: b.Setting, Reason: err.Error()}
	}
	out := ratelimit.NewOutbound(ratelimit.Outbound{Limiter: limiter, Name: b.Name, Key: b.Scope, What: "the " + b.What, MaxWait: b.MaxWait})
	return func(ctx context.Context) error {
		err := out.Take(ctx)
		var spent *ratelimit.SpentError
		if errors.As(err, &spent) {
			return &Deferred{At: spent.Until, Err: fmt.Errorf("%s spent until %s: queued for the background finisher",
				b.What, spent.Until.UTC().Format(time.RFC3339))}
		}
		return err
	}, nil
}
