package ratelimit_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/httpx"
	"provisioner/platform/ratelimit"
	"provisioner/platform/testutil"
)

// commandCounter is a go-redis hook counting the commands sent (or attempted) to Redis, the
// connection handshake aside.
type commandCounter struct{ n atomic.Int64 }

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "hello", "client", "auth", "select": // the connection handshake
		default:
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// logCounter is a slog handler counting records per level.
type logCounter struct {
	mu     sync.Mutex
	levels map[slog.Level]int
}

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }

func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.levels == nil {
		h.levels = map[slog.Level]int{}
	}
	h.levels[r.Level]++
	return nil
}

func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCounter) WithGroup(string) slog.Handler      { return h }

func (h *logCounter) count(l slog.Level) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.levels[l]
}

// redisClient is a client of the test Redis, or of addr instead when given, with short timeouts
// and no retries; it counts the commands it sends.
func redisClient(t testing.TB, addr string) (*redis.Client, *commandCounter) {
	t.Helper()
	opts, err := redis.ParseURL(testutil.RedisURL())
	require.NoError(t, err)
	if addr != "" {
		opts.Addr = addr
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.MaxRetries = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, -1
	c := redis.NewClient(opts)
	h := &commandCounter{}
	c.AddHook(h)
	t.Cleanup(func() { c.Close() })
	return c, h
}

// uniquePrefix is a key prefix no other test (or package) uses; its keys are deleted at the end.
func uniquePrefix(t testing.TB) string {
	t.Helper()
	prefix := "rltest:" + testutil.RandomSuffix()
	t.Cleanup(func() {
		opts, err := redis.ParseURL(testutil.RedisURL())
		if err != nil {
			return
		}
		c := redis.NewClient(opts)
		defer c.Close()
		ctx := context.Background()
		keys, _ := c.Keys(ctx, prefix+":*").Result()
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return prefix
}

type limiterOpts struct {
	redis      *redis.Client
	prefix     string
	retryEvery time.Duration
	logs       *logCounter
}

func newLimiter(t testing.TB, o limiterOpts) *ratelimit.Limiter {
	t.Helper()
	if o.prefix == "" {
		o.prefix = uniquePrefix(t)
	}
	if o.retryEvery == 0 {
		o.retryEvery = 100 * time.Millisecond
	}
	if o.logs == nil {
		o.logs = &logCounter{}
	}
	opts := ratelimit.Options{Prefix: o.prefix, Rates: map[string]string{"Test": "3-M"}, RetryEvery: o.retryEvery,
		Logger: slog.New(o.logs)}
	if o.redis != nil {
		opts.Redis = o.redis
	}
	l, err := ratelimit.New(opts)
	require.NoError(t, err)
	return l
}

func takeN(t *testing.T, l *ratelimit.Limiter, key string, n int) {
	t.Helper()
	for i := range n {
		r, err := l.Take(context.Background(), "Test", key)
		require.NoError(t, err)
		require.False(t, r.Reached, "hit %d of %s", i+1, key)
	}
}

func TestLimitRefusesThePastTheLimitHit(t *testing.T) {
	for _, backend := range []string{"redis", "memory"} {
		t.Run(backend, func(t *testing.T) {
			o := limiterOpts{prefix: uniquePrefix(t)}
			if backend == "redis" {
				o.redis, _ = redisClient(t, "")
			}
			l := newLimiter(t, o)
			ctx := context.Background()
			for i := range 3 {
				r, err := l.Take(ctx, "Test", "k")
				require.NoError(t, err)
				assert.False(t, r.Reached)
				assert.EqualValues(t, 2-i, r.Remaining)
				assert.EqualValues(t, 3, r.Limit)
				assert.Equal(t, "Test", r.Name)
				assert.Equal(t, time.Minute, r.Period)
				assert.WithinDuration(t, time.Now().Add(time.Minute), r.Reset, 2*time.Second)
			}
			r, err := l.Take(ctx, "Test", "k")
			require.NoError(t, err)
			assert.True(t, r.Reached)
			assert.Zero(t, r.Remaining)

			other, err := l.Take(ctx, "Test", "other")
			require.NoError(t, err)
			assert.False(t, other.Reached, "keys are independent")
			assert.EqualValues(t, 2, other.Remaining)

			p, err := l.Peek(ctx, "Test", "other")
			require.NoError(t, err)
			assert.EqualValues(t, 2, p.Remaining, "Peek does not count")

			_, err = l.Enforce(ctx, "Test", "k")
			var le *ratelimit.LimitError
			require.ErrorAs(t, err, &le)
			assert.Equal(t, "Test", le.Name)
			assert.Equal(t, 429, le.Status())
			assert.Positive(t, le.RetryAfter)
			assert.LessOrEqual(t, le.RetryAfter, time.Minute+time.Second)
			assert.True(t, le.Result.Reached)

			require.NoError(t, l.Reset(ctx, "Test", "k"))
			r, err = l.Take(ctx, "Test", "k")
			require.NoError(t, err)
			assert.False(t, r.Reached)
			assert.EqualValues(t, 2, r.Remaining, "Reset starts a fresh window")
		})
	}
}

func TestKeysAreNamespacedPrefixNameKey(t *testing.T) {
	rc, _ := redisClient(t, "")
	prefix := uniquePrefix(t)
	l := newLimiter(t, limiterOpts{redis: rc, prefix: prefix})
	_, err := l.Take(context.Background(), "Test", "203.0.113.7")
	require.NoError(t, err)
	v, err := rc.Get(context.Background(), prefix+":Test:203.0.113.7").Int()
	require.NoError(t, err)
	assert.Equal(t, 1, v)
}

func TestReplicasShareTheCount(t *testing.T) {
	prefix := uniquePrefix(t)
	rcA, _ := redisClient(t, "")
	rcB, _ := redisClient(t, "")
	a, b := newLimiter(t, limiterOpts{redis: rcA, prefix: prefix}), newLimiter(t, limiterOpts{redis: rcB, prefix: prefix})
	ctx := context.Background()
	for i, l := range []*ratelimit.Limiter{a, b, a} {
		r, err := l.Take(ctx, "Test", "k")
		require.NoError(t, err)
		require.False(t, r.Reached, "hit %d", i)
	}
	r, err := b.Take(ctx, "Test", "k")
	require.NoError(t, err)
	assert.True(t, r.Reached, "the hit past the limit is refused whichever replica takes it")
	r, err = a.Take(ctx, "Test", "k")
	require.NoError(t, err)
	assert.True(t, r.Reached)

	require.NoError(t, a.Reset(ctx, "Test", "k"))
	r, err = b.Take(ctx, "Test", "k")
	require.NoError(t, err)
	assert.False(t, r.Reached, "a reset on one replica frees the key on every replica")
}

func TestRates(t *testing.T) {
	for _, bad := range []string{"ten-per-minute", "10-W", "0-M", "10", "-1-M", ""} {
		_, err := ratelimit.New(ratelimit.Options{Rates: map[string]string{"Login": bad}})
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "RateLimit:Login", "the error names the limit")
	}

	l, err := ratelimit.New(ratelimit.Options{Rates: map[string]string{"Login": "2-s", "Custom": "7-D"}})
	require.NoError(t, err)
	ctx := context.Background()
	r, err := l.Take(ctx, "Login", "k")
	require.NoError(t, err)
	assert.EqualValues(t, 2, r.Limit, "configuration overrides a default")
	assert.Equal(t, time.Second, r.Period)
	r, err = l.Take(ctx, "Custom", "k")
	require.NoError(t, err)
	assert.EqualValues(t, 7, r.Limit, "configuration adds names")
	assert.Equal(t, 24*time.Hour, r.Period)
	for name, rate := range ratelimit.DefaultRates {
		r, err := l.Peek(ctx, name, "k")
		require.NoError(t, err, name)
		if name != "Login" {
			assert.Equal(t, rate, strconv.FormatInt(r.Limit, 10)+"-"+map[time.Duration]string{
				time.Minute: "M", time.Hour: "H"}[r.Period], name)
		}
	}
}

func TestUnknownLimitIsAnError(t *testing.T) {
	l := newLimiter(t, limiterOpts{})
	ctx := context.Background()
	_, err := l.Take(ctx, "Nope", "k")
	assert.ErrorContains(t, err, `"Nope"`)
	_, err = l.Peek(ctx, "Nope", "k")
	assert.Error(t, err)
	assert.Error(t, l.Reset(ctx, "Nope", "k"))
	_, err = l.Enforce(ctx, "Nope", "k")
	assert.Error(t, err)
}

func TestWriteHeaders(t *testing.T) {
	h := map[string]string{}
	ratelimit.WriteHeaders(func(k, v string) { h[k] = v }, ratelimit.Result{
		Name: "Login", Limit: 10, Remaining: 4, Reset: time.Now().Add(30 * time.Second), Period: time.Minute})
	assert.Equal(t, map[string]string{
		"X-RateLimit-Limit":     "10",
		"X-RateLimit-Remaining": "4",
		"X-RateLimit-Reset":     "30",
		"RateLimit-Policy":      "10;w=60",
		"RateLimit":             "limit=10, remaining=4, reset=30",
	}, h)
}

// TestSetHeadersWritesWhatWriteHeadersDoes: SetHeaders writes the headers on a Fiber answer its own
// way (the hot path); a client sees the same names and values as WriteHeaders gives, and the
// tightest of two Results.
func TestSetHeadersWritesWhatWriteHeadersDoes(t *testing.T) {
	reset := time.Now().Add(30 * time.Second)
	loose := ratelimit.Result{Name: "PerIp", Limit: 1000000, Remaining: 999999, Reset: reset, Period: time.Hour}
	tight := ratelimit.Result{Name: "Login", Limit: 10, Remaining: 4, Reset: reset, Period: time.Minute}
	app := fiber.New()
	app.Get("/", func(c *fiber.Ctx) error {
		ratelimit.SetHeaders(c, loose)
		ratelimit.SetHeaders(c, tight)
		ratelimit.SetHeaders(c, loose) // looser than what is written: ignored
		return c.SendString("ok")
	})
	res, err := app.Test(httptest.NewRequest("GET", "/", nil))
	require.NoError(t, err)
	want := map[string]string{}
	ratelimit.WriteHeaders(func(k, v string) { want[k] = v }, tight)
	got := map[string]string{}
	for _, k := range ratelimit.HeaderNames {
		assert.Len(t, res.Header.Values(k), 1, k)
		got[k] = res.Header.Get(k)
	}
	assert.Equal(t, want, got)
	assert.Equal(t, "limit=10, remaining=4, reset=30", got["RateLimit"])

	// Written under the names fasthttp finds them by: a route relaying another service's 429
	// takes them off by name.
	app.Get("/off", func(c *fiber.Ctx) error {
		ratelimit.SetHeaders(c, tight)
		for _, k := range ratelimit.HeaderNames {
			c.Response().Header.Del(k)
		}
		return c.SendString("ok")
	})
	res, err = app.Test(httptest.NewRequest("GET", "/off", nil))
	require.NoError(t, err)
	for _, k := range ratelimit.HeaderNames {
		assert.Empty(t, res.Header.Values(k), k)
	}
}

// TestResetNeverExceedsTheWindow: X-RateLimit-Reset (and Retry-After) said 61 for a 60 s window
// that had just begun (its end rounded up to the second, plus one): seconds until the window
// resets can be at most the window's length. Hit by hit, through shares, and in process.
func TestResetNeverExceedsTheWindow(t *testing.T) {
	rc, _ := redisClient(t, "")
	for _, tc := range []struct {
		name  string
		redis *redis.Client
		rate  string
	}{{"hit by hit", rc, "3-M"}, {"shares", rc, "1000-M"}, {"in process", nil, "3-M"}} {
		o := ratelimit.Options{Prefix: uniquePrefix(t), Rates: map[string]string{"Test": tc.rate}}
		if tc.redis != nil {
			o.Redis = tc.redis
		}
		l, err := ratelimit.New(o)
		require.NoError(t, err)
		var last ratelimit.Result
		for i := range 4 {
			r, err := l.Take(context.Background(), "Test", "k")
			require.NoError(t, err)
			h := map[string]string{}
			ratelimit.WriteHeaders(func(k, v string) { h[k] = v }, r)
			reset, err := strconv.Atoi(h["X-RateLimit-Reset"])
			require.NoError(t, err)
			assert.True(t, reset >= 1 && reset <= 60, "%s, hit %d: X-RateLimit-Reset %d for a 60 s window", tc.name, i+1, reset)
			last = r
		}
		if tc.rate == "3-M" {
			require.True(t, last.Reached)
			_, err := l.Enforce(context.Background(), "Test", "k")
			var le *ratelimit.LimitError
			require.ErrorAs(t, err, &le)
			ra, _ := strconv.Atoi(le.GetHeaders().Get("Retry-After"))
			assert.True(t, ra >= 1 && ra <= 60, "%s: Retry-After %d for a 60 s window", tc.name, ra)
		}
	}
}

func TestLimitErrorCarriesTheHeaders(t *testing.T) {
	l := newLimiter(t, limiterOpts{})
	ctx := context.Background()
	takeN(t, l, "k", 3)
	_, err := l.Enforce(ctx, "Test", "k")
	var le *ratelimit.LimitError
	require.ErrorAs(t, err, &le)
	h := le.GetHeaders()
	ra, _ := strconv.Atoi(h.Get("Retry-After"))
	assert.GreaterOrEqual(t, ra, 1)
	assert.LessOrEqual(t, ra, 60)
	assert.Equal(t, "0", h.Get("X-RateLimit-Remaining"))
	assert.Equal(t, "3;w=60", h.Get("RateLimit-Policy"))

	he := httpx.FromError(err)
	assert.Equal(t, 429, he.Status, "the HTTP layer maps it to a 429")
	assert.Equal(t, h.Get("Retry-After"), he.GetHeaders().Get("Retry-After"))
	assert.Contains(t, he.Message, "rate limit Test exceeded")
}

func get(t *testing.T, app *fiber.App, path string) (int, map[string]string, string) {
	t.Helper()
	res, err := app.Test(httptest.NewRequest("GET", path, nil), 5000)
	require.NoError(t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	h := map[string]string{}
	for _, k := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit", "Retry-After"} {
		h[k] = res.Header.Get(k)
	}
	return res.StatusCode, h, string(body)
}

func TestMiddlewareHeadersAnd429(t *testing.T) {
	rc, _ := redisClient(t, "")
	tight := newLimiter(t, limiterOpts{redis: rc})
	loose, err := ratelimit.New(ratelimit.Options{Prefix: uniquePrefix(t), Rates: map[string]string{"Loose": "100-H"}})
	require.NoError(t, err)
	byIP := func(c *fiber.Ctx) string { return c.IP() }
	app := fiber.New()
	ok := func(c *fiber.Ctx) error { return c.SendString("ok") }
	// The loose limit first: the tight one's headers replace its own.
	app.Get("/loose-first", loose.Middleware("Loose", func(*fiber.Ctx) string { return "a" }), tight.Middleware("Test", byIP), ok)
	// The tight limit first: the loose one must not replace its headers.
	app.Get("/tight-first", tight.Middleware("Test", func(*fiber.Ctx) string { return "b" }),
		loose.Middleware("Loose", func(*fiber.Ctx) string { return "b" }), ok)
	app.Get("/only-loose", loose.Middleware("Loose", func(*fiber.Ctx) string { return "c" }), ok)
	app.Get("/skipped", tight.Middleware("Test", func(*fiber.Ctx) string { return "" }), ok)

	for _, path := range []string{"/loose-first", "/tight-first"} {
		for i := range 3 {
			status, h, _ := get(t, app, path)
			require.Equal(t, 200, status, "%s hit %d", path, i+1)
			assert.Equal(t, "3", h["X-RateLimit-Limit"], "%s: the tightest limit's headers", path)
			assert.Equal(t, strconv.Itoa(2-i), h["X-RateLimit-Remaining"], path)
			reset, err := strconv.Atoi(h["X-RateLimit-Reset"])
			require.NoError(t, err)
			assert.True(t, reset >= 1 && reset <= 60, "X-RateLimit-Reset is seconds until reset: %d", reset)
			assert.Equal(t, "3;w=60", h["RateLimit-Policy"])
			assert.Equal(t, "limit=3, remaining="+strconv.Itoa(2-i)+", reset="+h["X-RateLimit-Reset"], h["RateLimit"])
			assert.Empty(t, h["Retry-After"])
		}
		status, h, body := get(t, app, path)
		assert.Equal(t, 429, status, path)
		ra, _ := strconv.Atoi(h["Retry-After"])
		assert.True(t, ra >= 1 && ra <= 60, "Retry-After %q", h["Retry-After"])
		assert.Equal(t, "0", h["X-RateLimit-Remaining"])
		assert.Equal(t, "3", h["X-RateLimit-Limit"])
		assert.Equal(t, "Too many requests: rate limit Test exceeded; retry in "+h["Retry-After"]+" s", body,
			"the message gives the wait Retry-After gives, as every other limit's does")
	}

	status, h, _ := get(t, app, "/only-loose")
	assert.Equal(t, 200, status)
	assert.Equal(t, "100", h["X-RateLimit-Limit"])
	assert.Equal(t, "100;w=3600", h["RateLimit-Policy"])

	for range 5 {
		status, h, _ = get(t, app, "/skipped")
		assert.Equal(t, 200, status, "an empty key skips the limit")
		assert.Empty(t, h["X-RateLimit-Limit"])
	}
}

func TestMiddlewareThroughTheEnvelope(t *testing.T) {
	l := newLimiter(t, limiterOpts{})
	s, err := httpx.NewServer(httpx.ServerOptions{Title: "t", Version: "1", Before: []fiber.Handler{
		l.Middleware("Test", func(c *fiber.Ctx) string { return c.IP() }),
	}})
	require.NoError(t, err)
	s.App.Get("/x", func(c *fiber.Ctx) error { return c.SendString("ok") })
	s.Finish()
	for range 3 {
		status, _, _ := get(t, s.App, "/x")
		require.Equal(t, 200, status)
	}
	status, h, body := get(t, s.App, "/x")
	assert.Equal(t, 429, status)
	assert.NotEmpty(t, h["Retry-After"])
	assert.Equal(t, "0", h["X-RateLimit-Remaining"])
	var env struct {
		Success bool   `json:"success"`
		Message string `json:"message"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &env), body)
	assert.False(t, env.Success)
	assert.Equal(t, "Too many requests: rate limit Test exceeded; retry in "+h["Retry-After"]+" s", env.Message)
}
