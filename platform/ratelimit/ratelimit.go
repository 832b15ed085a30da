// Package ratelimit applies named rate limits (ulule/limiter) per IP, per user and per operation.
// Each limit has a name and a rate N-S, N-M, N-H or N-D (DefaultRates, overridden by
// Options.Rates); a hit of limit name for key is counted under "<prefix>:<name>:<key>".
// Counters live in Redis, shared by every replica; while Redis cannot be reached every limit falls
// back to a per-process store and no call fails because of Redis (store.go). Limits of at least
// 32 hits per window are spent in process from shares taken from Redis in one round trip, never
// more than what is left (shares.go). Response headers describe the tightest limit applied:
// X-RateLimit-Limit, -Remaining, -Reset (seconds) and the IETF draft's RateLimit-Policy and
// RateLimit (headers.go). The full policy: docs/architecture.md, "Rate limits".
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"

	"provisioner/platform/reqctx"
)

// RateError is New's refusal of a configured rate: limit Name's Value is no rate.
type RateError struct{ Name, Value string }

// Reason is what is wrong with the value, for a message that names the setting itself.
func (e *RateError) Reason() string {
	return fmt.Sprintf("%q is not a rate like 10-M (N-S, N-M, N-H or N-D)", e.Value)
}

func (e *RateError) Error() string { return "RateLimit:" + e.Name + ": " + e.Reason() }

// DefaultRates are the limits of CONTRACT §1; configuration overrides any of them (a RateLimit key
// naming none stops the service: app refuses it). Options.Rates may add names (tests, benchkit).
var DefaultRates = map[string]string{
	"PerIp":          "300-M",
	"PerUser":        "600-M",
	"Login":          "10-M",
	"LoginPerIp":     "30-M", // every sign-in attempt of a client address, whatever the email
	"Register":       "5-M",
	"ForgotPassword": "3-H",
	// ForgotPasswordPerIp answers forgot-password's 429; ForgotPassword (per email) is silent.
	"ForgotPasswordPerIp": "20-H",
	"PasswordReveal":      "5-M",
	"AiGenerate":          "60-M",
	// Provision counts, per user, the state-changing operations of databases, DNS, workflow
	// automation and AI keys (httpx.PerUserLimit).
	"Provision": "30-M",
}

// DefaultRetryEvery is how long an unreachable Redis is left alone before it is tried again.
const DefaultRetryEvery = 5 * time.Second

// TightestLocal is the c.Locals key holding the tightest Result applied to a request.
const TightestLocal = "ratelimit.tightest"

// Options configures New.
type Options struct {
	// Redis is the shared store; nil means the in-process store only.
	Redis redis.UniversalClient
	// Prefix namespaces keys; default "rl".
	Prefix string
	// Rates are merged over DefaultRates (names are matched as given); a bad value is an error
	// naming its key (RateLimit:<name>).
	Rates map[string]string
	// Logger receives the fallback WARN and the recovery INFO; default slog.Default().
	Logger *slog.Logger
	// RetryEvery is how long an unreachable Redis is left alone before one request tries it
	// again; default DefaultRetryEvery.
	RetryEvery time.Duration
}

// Result is the state of one limit for one key.
type Result struct {
	// Name is the limit's name.
	Name string
	// Limit is the number of hits allowed per Period.
	Limit int64
	// Remaining is the number of hits left in the current window (0 once reached).
	Remaining int64
	// Reset is when the current window ends, rounded up to the second, and at most Period after
	// the hit (so X-RateLimit-Reset never exceeds the window's length).
	Reset time.Time
	// Reached reports that this hit was past the limit.
	Reached bool
	// Period is the window length.
	Period time.Duration
}

// LimitError is returned by Enforce when a limit is reached: the HTTP layer turns it into a 429
// with Retry-After and the rate-limit headers (Status and GetHeaders, which httpx.FromError reads).
type LimitError struct {
	Name       string
	RetryAfter time.Duration
	Result     Result
}

// Error returns the client-facing message.
func (e *LimitError) Error() string {
	return fmt.Sprintf("Too many requests: rate limit %s exceeded; retry in %d s", e.Name, retrySeconds(e.RetryAfter))
}

// Status returns 429.
func (e *LimitError) Status() int { return fiber.StatusTooManyRequests }

// GetHeaders returns Retry-After and the rate-limit headers of the reached limit.
func (e *LimitError) GetHeaders() http.Header {
	h := http.Header{}
	h.Set(fiber.HeaderRetryAfter, strconv.Itoa(retrySeconds(e.RetryAfter)))
	WriteHeaders(h.Set, e.Result)
	return h
}

// retrySeconds is d in whole seconds, rounded up, at least 1.
func retrySeconds(d time.Duration) int {
	return max(1, ceilSeconds(d))
}

// roundUpReset is the window's end, end, rounded up to the second, but no later than a window
// from now: the window began at the latest now, so it ends by then too (rounding alone said 61 s
// for a 60 s window that had just begun).
func roundUpReset(end time.Time, period time.Duration) time.Time {
	return minTime(time.Unix(end.Unix()+1, 0), time.Now().Add(period))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// ceilSeconds is d in whole seconds, rounded up, at least 0.
func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

// storeRef boxes the Redis store for atomic.Pointer.
type storeRef struct{ limiter.Store }

// Limiter holds every named limit and the store policy.
type Limiter struct {
	o      Options
	rates  map[string]limiter.Rate
	memory limiter.Store

	loadMu    sync.Mutex               // serializes loading the Lua scripts
	redis     atomic.Pointer[storeRef] // nil until the Lua scripts could be loaded
	downUntil atomic.Int64             // unix nanos before which Redis is not tried; 0 when up
	downAt    atomic.Int64             // unix nanos of the last Redis failure
	down      atomic.Bool              // Redis is considered down (for the logged transitions)

	shares    map[string]*shareTable // by limit name, for the limits spent in shares (read-only)
	nextSweep atomic.Int64           // unix nanos after which ended shares are dropped
}

// New parses the rates; it never contacts Redis, so it never fails because Redis is down.
func New(o Options) (*Limiter, error) {
	if o.Prefix == "" {
		o.Prefix = "rl"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RetryEvery <= 0 {
		o.RetryEvery = DefaultRetryEvery
	}
	l := &Limiter{o: o, rates: map[string]limiter.Rate{}, shares: map[string]*shareTable{},
		memory: memory.NewStoreWithOptions(limiter.StoreOptions{Prefix: o.Prefix, CleanUpInterval: time.Minute})}
	merged := map[string]string{}
	for k, v := range DefaultRates {
		merged[k] = v
	}
	for k, v := range o.Rates {
		merged[k] = v
	}
	for name, v := range merged {
		r, err := limiter.NewRateFromFormatted(v)
		if err != nil || r.Limit <= 0 {
			return nil, &RateError{Name: name, Value: v}
		}
		l.rates[name] = r
		if r.Limit/shareDivisor >= minShare {
			l.shares[name] = newShareTable()
		}
	}
	return l, nil
}

// Take counts one hit of the named limit for key and reports the state. An unknown name is an
// error; an unreachable Redis is not (see the package documentation).
func (l *Limiter) Take(ctx context.Context, name, key string) (Result, error) {
	if t := l.shares[name]; t != nil {
		if r, ok := l.takeShared(ctx, t, name, key, l.rates[name]); ok {
			return r, nil
		}
	}
	return l.do(ctx, "take", name, func(s limiter.Store, r limiter.Rate) (limiter.Context, error) {
		return s.Get(ctx, name+":"+key, r)
	})
}

// Peek reports the state of the named limit for key without counting a hit.
func (l *Limiter) Peek(ctx context.Context, name, key string) (Result, error) {
	return l.do(ctx, "peek", name, func(s limiter.Store, r limiter.Rate) (limiter.Context, error) {
		return s.Peek(ctx, name+":"+key, r)
	})
}

// Reset clears the named limit for key (e.g. after a successful login), in Redis, in the
// in-process fallback and this replica's share.
func (l *Limiter) Reset(ctx context.Context, name, key string) error {
	var sh *share
	if t := l.shares[name]; t != nil {
		sh = t.remove(key)
	}
	if sh != nil {
		// Under the share's lock: a background fetch under way ends before the count is cleared
		// below, and one that has not started yet sees dropped and takes nothing.
		sh.mu.Lock()
		sh.dropped, sh.left = true, 0
		sh.mu.Unlock()
	}
	_, err := l.do(ctx, "reset", name, func(s limiter.Store, r limiter.Rate) (limiter.Context, error) {
		if s != l.memory {
			if _, err := l.memory.Reset(ctx, name+":"+key, r); err != nil {
				return limiter.Context{}, err
			}
		}
		return s.Reset(ctx, name+":"+key, r)
	})
	return err
}

// Enforce takes one hit and returns a *LimitError (Status 429, RetryAfter) when the limit is
// reached. It is the helper for handlers that are not Fiber middleware.
func (l *Limiter) Enforce(ctx context.Context, name, key string) (Result, error) {
	r, err := l.Take(ctx, name, key)
	if err != nil {
		return r, err
	}
	if r.Reached {
		return r, &LimitError{Name: name, RetryAfter: time.Until(r.Reset), Result: r}
	}
	return r, nil
}

// Check is Enforce for request handlers: it also sets the rate-limit headers on the response
// (when the limit is the tightest so far). The *LimitError it returns is answered as a 429 with
// Retry-After and the headers of the limit reached.
func (l *Limiter) Check(ctx context.Context, name, key string) error {
	r, err := l.Enforce(ctx, name, key)
	if c := reqctx.Fiber(ctx); c != nil {
		SetHeaders(c, r)
	}
	return err
}

// Middleware counts the named limit with the key from keyFn (an empty key skips it). It records
// the headers and, when the limit is reached, sets Retry-After (seconds until the window resets,
// at least 1) and returns a 429 fiber.Error with LimitError's message ("Too many requests: rate
// limit <name> exceeded; retry in N s"), as every other limit answers.
func (l *Limiter) Middleware(name string, keyFn func(*fiber.Ctx) string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		key := keyFn(c)
		if key == "" {
			return c.Next()
		}
		r, err := l.Enforce(c.UserContext(), name, key)
		SetHeaders(c, r)
		var le *LimitError
		if errors.As(err, &le) {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retrySeconds(le.RetryAfter)))
			return fiber.NewError(fiber.StatusTooManyRequests, le.Error())
		}
		if err != nil {
			return err
		}
		return c.Next()
	}
}

// Healthy reports whether Redis answers a PING within a second (true without Redis).
func (l *Limiter) Healthy(ctx context.Context) bool {
	if l.o.Redis == nil {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return l.o.Redis.Ping(ctx).Err() == nil
}
