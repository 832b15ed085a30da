// Package ratelimit applies named rate limits (ulule/limiter) per IP, per user and per operation.
//
// Each limit has a name and a rate in the ulule format N-S, N-M, N-H or N-D (DefaultRates,
// overridden and extended by Options.Rates). A hit of limit name for key is counted under
// "<prefix>:<name>:<key>".
//
// Store policy: with Redis configured, counters live in Redis and are shared by every replica. If
// Redis cannot be reached (down at startup, or gone mid-run), every limit falls back to a
// per-process in-memory store: limits keep applying, per replica, and no call fails because of
// Redis (Take, Peek, Reset and Enforce never return a Redis error, so no request becomes a 500).
// New never contacts Redis, so the service starts while Redis is down. After a failure Redis is
// left alone for Options.RetryEvery (default 5 s, a "down until" timestamp, so no request pays a
// network round trip while it is down); then a single request probes it while the others stay on
// memory, and a success switches every limit back to Redis. The switch is logged once each way: a
// WARN when falling back, an INFO when Redis is used again. Counts made in memory during an outage
// are not copied to Redis. This holds for the general limits and for the sensitive ones (login,
// register, forgot-password, password reveal) alike, so a Redis outage neither opens the login
// brute-force door nor locks users out.
//
// Shares: a limit of at least 32 hits per window (PerIp, PerUser, AiGenerate at their defaults)
// is not counted in Redis hit by hit. A replica takes a share of the window's hits in one round
// trip (a Lua script: never more than what is left of the limit, a sixteenth of it at most, 256 at
// most) and spends it in process; once less than 32 hits are known to be left, hits are counted in
// Redis one by one again. So replicas together never admit more than the limit in a window, the
// hot path costs a Redis round trip once per share, and a replica may refuse up to one share's
// worth early when a client's traffic moves to another replica in the middle of a window (the
// other replica's unspent share is counted). Smaller limits (Login, Register, ForgotPassword,
// PasswordReveal) are always counted hit by hit. X-RateLimit-Remaining counts shares taken by
// other replicas as spent. The next share is fetched in the background when a quarter of the
// current one is left. While Redis is down, a share already held is spent, and further hits go to
// the in-process store as above.
//
// Response headers (Middleware, SetHeaders, WriteHeaders) describe the tightest limit applied to
// the request, the one with the fewest remaining hits: X-RateLimit-Limit, X-RateLimit-Remaining,
// X-RateLimit-Reset (seconds until the window resets, not a timestamp), and the IETF draft pair
// RateLimit-Policy ("<limit>;w=<window seconds>") and RateLimit ("limit=<n>, remaining=<n>,
// reset=<seconds>").
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/danielgtaylor/huma/v2"
	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"provisioner/platform/httpx"
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
	"Register":       "5-M",
	"ForgotPassword": "3-H",
	// ForgotPasswordPerIp answers forgot-password's 429; ForgotPassword (per email) is silent.
	"ForgotPasswordPerIp": "20-H",
	"PasswordReveal":      "5-M",
	"AiGenerate":          "60-M",
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
// with Retry-After and the rate-limit headers (see GetHeaders and HTTPError).
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

// HTTPError returns the envelope error with Retry-After and the rate-limit headers.
func (e *LimitError) HTTPError() *httpx.Error {
	he := httpx.NewError(fiber.StatusTooManyRequests, e.Error())
	for k := range e.GetHeaders() {
		he.WithHeader(k, e.GetHeaders().Get(k))
	}
	return he
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

// Shares of a window (see the package documentation).
const (
	shareDivisor = 16  // a share is at most this fraction of what is left of the limit
	maxShare     = 256 // and at most this many hits
	minShare     = 2   // smaller shares are not taken: hits are counted one by one
)

// shareScript takes up to ARGV[1] hits of a limit of ARGV[2] for a window of ARGV[3] ms, never
// more than what is left; it counts one hit when nothing is left (a refused hit counts, as in
// ulule's store, whose key layout and window it shares). It returns the hits granted, the count
// after the call and the window's remaining milliseconds.
var shareScript = redis.NewScript(`
local c = tonumber(redis.call("get", KEYS[1]) or "0")
local grant = tonumber(ARGV[2]) - c
if grant > tonumber(ARGV[1]) then grant = tonumber(ARGV[1]) end
if grant < 0 then grant = 0 end
local inc = grant
if inc == 0 then inc = 1 end
local n = redis.call("incrby", KEYS[1], inc)
if n == inc then redis.call("pexpire", KEYS[1], ARGV[3]) end
return {grant, n, redis.call("pttl", KEYS[1])}
`)

// share is this replica's unspent share of one window of one limit for one key.
type share struct {
	mu        sync.Mutex
	left      int64     // hits of the share not spent yet
	count     int64     // the shared count after the share was taken (every replica's hits and shares)
	end       time.Time // end of the window
	last      int64     // size of the last share granted
	refilling bool      // a background fetch of the next share is under way
	// dropped: Reset removed this share; a fetch that has not run yet must not take a new one
	// (it would land after the reset and count hits that nobody can spend).
	dropped bool
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

	shares    sync.Map     // "<name>:<key>" → *share
	nextSweep atomic.Int64 // unix nanos after which ended shares are dropped
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
			return nil, &RateError{Name: name, Value: v}
		}
		l.rates[name] = r
	}
	return l, nil
}

// store returns the Redis store when it may be used, else the memory store. While Redis is down
// it costs no network round trip; once the retry time has passed, exactly one caller gets the
// Redis store (the probe) and pushes the next retry further, the others keep the memory store.
func (l *Limiter) store() (limiter.Store, bool) {
	if l.o.Redis == nil {
		return l.memory, false
	}
	probe := false
	if until := l.downUntil.Load(); until != 0 {
		now := time.Now().UnixNano()
		if now < until || !l.downUntil.CompareAndSwap(until, now+int64(l.o.RetryEvery)) {
			return l.memory, false
		}
		probe = true
	}
	if ref := l.redis.Load(); ref != nil {
		return ref.Store, true
	}
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	if ref := l.redis.Load(); ref != nil {
		return ref.Store, true
	}
	if !probe && l.downUntil.Load() != 0 {
		// This caller waited while another one failed to load the scripts: Redis is down.
		return l.memory, false
	}
	s, err := sredis.NewStoreWithOptions(l.o.Redis, limiter.StoreOptions{Prefix: l.o.Prefix})
	if err != nil {
		l.markDown(err)
		return l.memory, false
	}
	l.redis.Store(&storeRef{s})
	return s, true
}

// markDown records a Redis failure: Redis is left alone for RetryEvery, and the first failure
// of an outage is logged.
func (l *Limiter) markDown(err error) {
	now := time.Now()
	l.downAt.Store(now.UnixNano())
	l.downUntil.Store(now.Add(l.o.RetryEvery).UnixNano())
	if !l.down.Swap(true) {
		l.o.Logger.Warn("rate limits fall back to the in-process store (per replica): Redis is unreachable",
			"error", err.Error(), "retryEvery", l.o.RetryEvery.String())
	}
}

// markUp records a Redis success of an operation that started at start (unix nanos): one that
// started before the last failure says nothing about Redis now.
func (l *Limiter) markUp(start int64) {
	if !l.down.Load() || start <= l.downAt.Load() {
		return
	}
	if l.down.CompareAndSwap(true, false) {
		l.downUntil.Store(0)
		l.o.Logger.Info("rate limits use Redis again")
	}
}

// do runs op on the store in use; a Redis error switches to the memory store, never to an error.
func (l *Limiter) do(ctx context.Context, verb, name string, op func(limiter.Store, limiter.Rate) (limiter.Context, error)) (Result, error) {
	rate, ok := l.rates[name]
	if !ok {
		return Result{}, fmt.Errorf("%s %q: unknown rate limit", verb, name)
	}
	start := time.Now().UnixNano()
	s, isRedis := l.store()
	c, err := op(s, rate)
	switch {
	case err != nil && isRedis:
		if ctx.Err() == nil { // not the caller giving up: Redis failed
			l.markDown(err)
		}
		c, err = op(l.memory, rate)
	case isRedis:
		l.markUp(start)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%s %q: %w", verb, name, err)
	}
	return Result{Name: name, Limit: c.Limit, Remaining: c.Remaining, Reached: c.Reached, Period: rate.Period,
		// ulule truncates the window's end to the second: round it up instead, so that a client
		// waiting until Reset (or for Retry-After) finds the window over.
		Reset: roundUpReset(time.Unix(c.Reset, 0), rate.Period)}, nil
}

// Take counts one hit of the named limit for key and reports the state. An unknown name is an
// error; an unreachable Redis is not (see the package documentation).
func (l *Limiter) Take(ctx context.Context, name, key string) (Result, error) {
	if rate, ok := l.rates[name]; ok && rate.Limit/shareDivisor >= minShare {
		if r, ok := l.takeShared(ctx, name, key, rate); ok {
			return r, nil
		}
	}
	return l.do(ctx, "take", name, func(s limiter.Store, r limiter.Rate) (limiter.Context, error) {
		return s.Get(ctx, name+":"+key, r)
	})
}

// takeShared spends one hit of this replica's share of the window, taking a new share from Redis
// when it is spent; ok is false when the hit must be counted one by one instead (few hits left,
// Redis not in use or failing). When a quarter of the share is left, the next one is fetched in
// the background, so a steady stream of hits does not wait for Redis.
func (l *Limiter) takeShared(ctx context.Context, name, key string, rate limiter.Rate) (Result, bool) {
	id := name + ":" + key
	v, found := l.shares.Load(id)
	if !found {
		v, _ = l.shares.LoadOrStore(id, &share{})
	}
	sh := v.(*share)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.dropped { // reset while this hit waited: counted one by one
		return Result{}, false
	}
	now := time.Now()
	if !now.Before(sh.end) {
		sh.left, sh.count, sh.last = 0, 0, 0
		l.sweep(now)
	}
	if sh.left > 0 {
		sh.left--
		if n := l.shareSize(rate, sh.count); !sh.refilling && sh.left <= sh.last/4 && n >= minShare && time.Until(sh.end) > rate.Period/8 {
			sh.refilling = true
			go l.refill(id, sh, n, rate)
		}
		return sh.result(name, rate, false), true
	}
	n := l.shareSize(rate, sh.count)
	if n < minShare || l.o.Redis == nil {
		return Result{}, false
	}
	if _, isRedis := l.store(); !isRedis {
		return Result{}, false
	}
	if !l.fetchShare(ctx, id, sh, n, rate) {
		return Result{}, false
	}
	if sh.left == 0 {
		return sh.result(name, rate, true), true
	}
	sh.left--
	return sh.result(name, rate, false), true
}

// shareSize is the size of the next share given the last known count (below minShare: none).
func (l *Limiter) shareSize(rate limiter.Rate, count int64) int64 {
	return min(maxShare, (rate.Limit-count)/shareDivisor)
}

// refill fetches the next share in the background.
func (l *Limiter) refill(id string, sh *share, n int64, rate limiter.Rate) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	defer func() { sh.refilling = false }()
	if _, isRedis := l.store(); isRedis && !sh.dropped {
		l.fetchShare(ctx, id, sh, n, rate)
	}
}

// fetchShare takes up to n hits from Redis into sh (sh.mu held); false when Redis failed.
func (l *Limiter) fetchShare(ctx context.Context, id string, sh *share, n int64, rate limiter.Rate) bool {
	start := time.Now()
	out, err := shareScript.Run(ctx, l.o.Redis, []string{l.o.Prefix + ":" + id}, n, rate.Limit, rate.Period.Milliseconds()).Int64Slice()
	if err != nil || len(out) != 3 {
		if err != nil && ctx.Err() == nil {
			l.markDown(err)
		}
		return false
	}
	l.markUp(start.UnixNano())
	granted, count, ttl := out[0], out[1], time.Duration(out[2])*time.Millisecond
	if ttl <= 0 {
		ttl = rate.Period
	}
	end := start.Add(ttl)
	if !start.Before(sh.end) || end.After(sh.end.Add(rate.Period/2)) {
		sh.left, sh.count = 0, 0 // a new window: what was left of the old one is void
	}
	sh.left += granted
	sh.count, sh.end = max(sh.count, count), end
	if granted > 0 {
		sh.last = granted
	}
	return true
}

func (sh *share) result(name string, rate limiter.Rate, reached bool) Result {
	remaining := max(0, rate.Limit-sh.count+sh.left)
	if reached {
		remaining = 0
	}
	return Result{Name: name, Limit: rate.Limit, Remaining: remaining, Reached: reached, Period: rate.Period,
		Reset: roundUpReset(sh.end, rate.Period)}
}

// sweep drops the shares of ended windows, at most once a minute.
func (l *Limiter) sweep(now time.Time) {
	next := l.nextSweep.Load()
	if now.UnixNano() < next || !l.nextSweep.CompareAndSwap(next, now.Add(time.Minute).UnixNano()) {
		return
	}
	go l.shares.Range(func(k, v any) bool {
		sh := v.(*share)
		if sh.mu.TryLock() {
			if time.Now().After(sh.end) {
				l.shares.Delete(k)
			}
			sh.mu.Unlock()
		}
		return true
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
	if v, ok := l.shares.LoadAndDelete(name + ":" + key); ok {
		// Under the share's lock: a background fetch under way ends before the count is cleared
		// below, and one that has not started yet sees dropped and takes nothing.
		sh := v.(*share)
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
// (when the limit is the tightest so far) and returns the 429 as an envelope error.
func (l *Limiter) Check(ctx context.Context, name, key string) error {
	r, err := l.Enforce(ctx, name, key)
	if c := httpx.FiberCtx(ctx); c != nil {
		SetHeaders(c, r)
	}
	var le *LimitError
	if errors.As(err, &le) {
		return le.HTTPError()
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

// SetHeaders writes r's headers on c unless a tighter limit (fewer remaining hits) already did; the
// tightest Result is kept in c.Locals(TightestLocal). A zero Result is ignored.
func SetHeaders(c *fiber.Ctx, r Result) {
	if r.Limit == 0 {
		return
	}
	if prev, ok := c.Locals(TightestLocal).(Result); ok && prev.Remaining < r.Remaining {
		return
	}
	c.Locals(TightestLocal, r)
	// The hot path (every limited request, often twice): canonical names set as they are (no
	// normalising), values formatted into one buffer (no string per header). Same headers as
	// WriteHeaders.
	h := &c.Response().Header
	var buf [160]byte
	v := buf[:0]
	limit := len(v)
	v = strconv.AppendInt(v, r.Limit, 10)
	remaining := len(v)
	v = strconv.AppendInt(v, r.Remaining, 10)
	reset := len(v)
	v = strconv.AppendInt(v, int64(ceilSeconds(time.Until(r.Reset))), 10)
	end := len(v)
	h.SetCanonical(headerKeys[0], v[limit:remaining])
	h.SetCanonical(headerKeys[1], v[remaining:reset])
	h.SetCanonical(headerKeys[2], v[reset:end])
	policy := len(v)
	v = append(v, v[limit:remaining]...)
	v = append(v, ";w="...)
	v = strconv.AppendInt(v, int64(r.Period/time.Second), 10)
	h.SetCanonical(headerKeys[3], v[policy:])
	both := len(v)
	v = append(append(v, "limit="...), v[limit:remaining]...)
	v = append(append(v, ", remaining="...), v[remaining:reset]...)
	v = append(append(v, ", reset="...), v[reset:end]...)
	h.SetCanonical(headerKeys[4], v[both:])
}

// headerKeys are HeaderNames as fasthttp writes (and finds) them: each word capitalised, the rest
// lower case (X-Ratelimit-Limit), for SetHeaders.
var headerKeys = func() (k [len(HeaderNames)][]byte) {
	for i, n := range HeaderNames {
		b := []byte(strings.ToLower(n))
		for j := range b {
			if j == 0 || b[j-1] == '-' {
				b[j] = byte(unicode.ToUpper(rune(b[j])))
			}
		}
		k[i] = b
	}
	return k
}()

// HeaderNames are the headers WriteHeaders writes (a route that relays another service's 429
// takes them off its answer).
var HeaderNames = [...]string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"}

// DocHeaders describes HeaderNames for the OpenAPI document: httpx.ServerOptions.LimitHeaders,
// which declares them on the responses of every operation the limits count. A fresh map.
func DocHeaders() map[string]*huma.Param {
	integer := func() *huma.Schema { return &huma.Schema{Type: "integer", Minimum: new(float64)} }
	const tightest = " of the tightest limit that applied to the request (the one with the fewest hits left)."
	return map[string]*huma.Param{
		HeaderNames[0]: {Description: "Hits allowed per window" + tightest, Schema: integer()},
		HeaderNames[1]: {Description: "Hits left in the current window" + tightest + " Hits another instance " +
			"of the service has reserved count as spent.", Schema: integer()},
		HeaderNames[2]: {Description: "Seconds until the current window resets (not a timestamp; at most the window's " +
			"length)" + tightest, Schema: integer()},
		HeaderNames[3]: {Description: "IETF draft: `<limit>;w=<window seconds>`" + tightest,
			Schema: &huma.Schema{Type: "string", Pattern: `^[0-9]+;w=[0-9]+$`}, Example: "100;w=60"},
		HeaderNames[4]: {Description: "IETF draft: `limit=<n>, remaining=<n>, reset=<seconds>`" + tightest,
			Schema:  &huma.Schema{Type: "string", Pattern: `^limit=[0-9]+, remaining=[0-9]+, reset=[0-9]+$`},
			Example: "limit=100, remaining=99, reset=60"},
	}
}

// WriteHeaders writes X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (seconds until
// the window resets, not a timestamp) and the IETF draft pair RateLimit-Policy ("<limit>;w=<window
// seconds>") and RateLimit ("limit=<n>, remaining=<n>, reset=<seconds>") through set.
func WriteHeaders(set func(k, v string), r Result) {
	reset := strconv.Itoa(ceilSeconds(time.Until(r.Reset)))
	limit, remaining := strconv.FormatInt(r.Limit, 10), strconv.FormatInt(r.Remaining, 10)
	set(HeaderNames[0], limit)
	set(HeaderNames[1], remaining)
	set(HeaderNames[2], reset)
	set(HeaderNames[3], limit+";w="+strconv.Itoa(int(r.Period/time.Second)))
	set(HeaderNames[4], "limit="+limit+", remaining="+remaining+", reset="+reset)
}
