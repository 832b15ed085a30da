// Package ratelimit applies named rate limits (ulule/limiter) per IP, per user and per operation.
//
// Store policy: with Redis configured, counters live in Redis and are shared by every replica. If
// Redis cannot be reached (down at startup, or gone mid-run), every limit falls back to a
// per-process in-memory store: limits keep applying, per replica, and no request fails because of
// Redis. Redis is retried at most every few seconds (no extra round trip per request while it is
// down); the switch is logged once each way. This holds for the general limits and for the
// sensitive ones (login, register, forgot-password, password reveal) alike, so a Redis outage
// neither opens the login brute-force door nor locks users out.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"provisioner/platform/httpx"
)

// DefaultRates are the limits of CONTRACT §1; configuration overrides any and may add names.
var DefaultRates = map[string]string{
	"PerIp":          "300-M",
	"PerUser":        "600-M",
	"Login":          "10-M",
	"Register":       "5-M",
	"ForgotPassword": "3-H",
	"PasswordReveal": "5-M",
	"AiGenerate":     "60-M",
}

// Options configures New.
type Options struct {
	// Redis is the shared store; nil means the in-process store only.
	Redis redis.UniversalClient
	// Prefix namespaces keys; default "rl".
	Prefix string
	// Rates are merged over DefaultRates (names are matched as given).
	Rates  map[string]string
	Logger *slog.Logger
	// RetryEvery is how often an unreachable Redis is tried again; default 5 s.
	RetryEvery time.Duration
}

// Result is the state of one limit after a hit.
type Result struct {
	Name      string
	Limit     int64
	Remaining int64
	Reset     time.Time
	Reached   bool
	Period    time.Duration
}

// LimitError is returned when a limit is reached: a 429 with Retry-After and the limit headers.
type LimitError struct {
	Name       string
	RetryAfter time.Duration
	Result     Result
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("Too many requests: rate limit %s exceeded; retry in %d s", e.Name, retrySeconds(e.RetryAfter))
}

// Status is 429.
func (e *LimitError) Status() int { return fiber.StatusTooManyRequests }

// HTTPError is the envelope error with Retry-After and the rate-limit headers.
func (e *LimitError) HTTPError() *httpx.Error {
	he := httpx.NewError(fiber.StatusTooManyRequests, e.Error())
	he.WithHeader(fiber.HeaderRetryAfter, strconv.Itoa(retrySeconds(e.RetryAfter)))
	WriteHeaders(func(k, v string) { he.WithHeader(k, v) }, e.Result)
	return he
}

func retrySeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// Limiter holds every named limit.
type Limiter struct {
	o      Options
	rates  map[string]limiter.Rate
	memory limiter.Store

	mu        sync.Mutex
	redis     limiter.Store // nil until the Lua scripts could be loaded
	downUntil atomic.Int64  // unix nanos before which Redis is not tried
	down      atomic.Bool
}

// New parses the rates; it never fails because Redis is down.
func New(o Options) (*Limiter, error) {
	if o.Prefix == "" {
		o.Prefix = "rl"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RetryEvery <= 0 {
		o.RetryEvery = 5 * time.Second
	}
	l := &Limiter{o: o, rates: map[string]limiter.Rate{},
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
			return nil, fmt.Errorf("RateLimit:%s: %q is not a rate like 10-M (N-S, N-M, N-H or N-D)", name, v)
		}
		l.rates[name] = r
	}
	return l, nil
}

// store returns the Redis store when it is usable, else the memory store.
func (l *Limiter) store(ctx context.Context) (limiter.Store, bool) {
	if l.o.Redis == nil {
		return l.memory, false
	}
	if time.Now().UnixNano() < l.downUntil.Load() {
		return l.memory, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.redis == nil {
		s, err := sredis.NewStoreWithOptions(l.o.Redis, limiter.StoreOptions{Prefix: l.o.Prefix, MaxRetry: 1})
		if err != nil {
			l.markDown(err)
			return l.memory, false
		}
		l.redis = s
	}
	return l.redis, true
}

func (l *Limiter) markDown(err error) {
	l.downUntil.Store(time.Now().Add(l.o.RetryEvery).UnixNano())
	if !l.down.Swap(true) {
		l.o.Logger.Warn("rate limits fall back to the in-process store: Redis is unreachable", "error", err.Error())
	}
}

func (l *Limiter) markUp() {
	if l.down.Swap(false) {
		l.o.Logger.Info("rate limits use Redis again")
	}
}

func (l *Limiter) do(ctx context.Context, name, key string, op func(limiter.Store, limiter.Rate) (limiter.Context, error)) (Result, error) {
	rate, ok := l.rates[name]
	if !ok {
		return Result{}, fmt.Errorf("take %q: unknown rate limit", name)
	}
	s, isRedis := l.store(ctx)
	c, err := op(s, rate)
	if err != nil && isRedis {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		l.markDown(err)
		c, err = op(l.memory, rate)
	} else if err == nil && isRedis {
		l.markUp()
	}
	if err != nil {
		return Result{}, fmt.Errorf("take %q: %w", name, err)
	}
	return Result{Name: name, Limit: c.Limit, Remaining: c.Remaining, Reset: time.Unix(c.Reset, 0),
		Reached: c.Reached, Period: rate.Period}, nil
}

// Take counts one hit of the named limit for key.
func (l *Limiter) Take(ctx context.Context, name, key string) (Result, error) {
	return l.do(ctx, name, key, func(s limiter.Store, r limiter.Rate) (limiter.Context, error) {
		return s.Get(ctx, name+":"+key, r)
	})
}

// Peek reports the state without counting.
func (l *Limiter) Peek(ctx context.Context, name, key string) (Result, error) {
	return l.do(ctx, name, key, func(s limiter.Store, r limiter.Rate) (limiter.Context, error) {
		return s.Peek(ctx, name+":"+key, r)
	})
}

// Reset clears the named limit for key.
func (l *Limiter) Reset(ctx context.Context, name, key string) error {
	_, err := l.do(ctx, name, key, func(s limiter.Store, r limiter.Rate) (limiter.Context, error) {
		return s.Reset(ctx, name+":"+key, r)
	})
	return err
}

// Enforce takes one hit and returns a *LimitError when the limit is reached.
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
// (when the limit is the tightest so far) and returns the 429 as an envelope error.
func (l *Limiter) Check(ctx context.Context, name, key string) error {
	r, err := l.Enforce(ctx, name, key)
	if c := httpx.FiberCtx(ctx); c != nil && r.Limit > 0 {
		SetHeaders(c, r)
	}
	var le *LimitError
	if errors.As(err, &le) {
		return le.HTTPError()
	}
	return err
}

// Middleware counts the named limit with the key from keyFn (an empty key skips it).
func (l *Limiter) Middleware(name string, keyFn func(*fiber.Ctx) string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		key := keyFn(c)
		if key == "" {
			return c.Next()
		}
		r, err := l.Enforce(c.UserContext(), name, key)
		if r.Limit > 0 {
			SetHeaders(c, r)
		}
		var le *LimitError
		if errors.As(err, &le) {
			return le.HTTPError()
		}
		if err != nil {
			return err
		}
		return c.Next()
	}
}

// Healthy reports whether the shared store answers (true without Redis).
func (l *Limiter) Healthy(ctx context.Context) bool {
	if l.o.Redis == nil {
		return true
	}
	return l.o.Redis.Ping(ctx).Err() == nil
}

const tightestLocal = "ratelimit.tightest"

// SetHeaders writes r's headers on c unless a tighter limit already did.
func SetHeaders(c *fiber.Ctx, r Result) {
	if r.Limit == 0 {
		return
	}
	if prev, ok := c.Locals(tightestLocal).(Result); ok && prev.Remaining < r.Remaining {
		return
	}
	c.Locals(tightestLocal, r)
	WriteHeaders(func(k, v string) { c.Set(k, v) }, r)
}

// WriteHeaders writes X-RateLimit-Limit/Remaining/Reset (seconds until the window resets) and the
// IETF draft pair RateLimit-Policy / RateLimit.
func WriteHeaders(set func(k, v string), r Result) {
	reset := int(time.Until(r.Reset).Seconds() + 0.999)
	if reset < 0 {
		reset = 0
	}
	set("X-RateLimit-Limit", strconv.FormatInt(r.Limit, 10))
	set("X-RateLimit-Remaining", strconv.FormatInt(r.Remaining, 10))
	set("X-RateLimit-Reset", strconv.Itoa(reset))
	set("RateLimit-Policy", fmt.Sprintf("%d;w=%d", r.Limit, int(r.Period.Seconds())))
	set("RateLimit", fmt.Sprintf("limit=%d, remaining=%d, reset=%d", r.Limit, r.Remaining, reset))
}
