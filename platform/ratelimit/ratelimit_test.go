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

func TestRedisDownAtStartupStillLimits(t *testing.T) {
	rc, cmds := redisClient(t, "127.0.0.1:1")
	logs := &logCounter{}
	l := newLimiter(t, limiterOpts{redis: rc, retryEvery: time.Hour, logs: logs})
	ctx := context.Background()
	takeN(t, l, "k", 3)
	r, err := l.Take(ctx, "Test", "k")
	require.NoError(t, err)
	assert.True(t, r.Reached, "the in-process fallback enforces the limit")
	_, err = l.Enforce(ctx, "Test", "k")
	var le *ratelimit.LimitError
	assert.ErrorAs(t, err, &le)
	require.NoError(t, l.Reset(ctx, "Test", "k"))
	_, err = l.Peek(ctx, "Test", "k")
	require.NoError(t, err)

	assert.EqualValues(t, 1, cmds.n.Load(), "Redis is tried once, not on every request, while it is down")
	assert.Equal(t, 1, logs.count(slog.LevelWarn), "one WARN for the fallback")
	assert.False(t, l.Healthy(ctx))
}

func TestOneProbePerRetryWhileDown(t *testing.T) {
	rc, cmds := redisClient(t, "127.0.0.1:1")
	l := newLimiter(t, limiterOpts{redis: rc, retryEvery: 200 * time.Millisecond})
	ctx := context.Background()
	_, err := l.Take(ctx, "Test", "first")
	require.NoError(t, err)
	require.EqualValues(t, 1, cmds.n.Load())

	time.Sleep(250 * time.Millisecond)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Take(ctx, "Test", strconv.Itoa(i))
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 2, cmds.n.Load(), "once the retry time has passed, a single request probes Redis")
}

func TestCanceledContextIsNotAnOutage(t *testing.T) {
	rc, _ := redisClient(t, "")
	logs := &logCounter{}
	l := newLimiter(t, limiterOpts{redis: rc, logs: logs})
	_, err := l.Take(context.Background(), "Test", "warm") // loads the scripts
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = l.Take(ctx, "Test", "k")
	assert.NoError(t, err)
	assert.Zero(t, logs.count(slog.LevelWarn), "the caller giving up says nothing about Redis")
}

func TestRedisOutageMidRunFallsBackAndRecovers(t *testing.T) {
	opts, err := redis.ParseURL(testutil.RedisURL())
	require.NoError(t, err)
	proxy := testutil.StartProxy(t, opts.Addr)
	rc, cmds := redisClient(t, proxy.Addr)
	direct, _ := redisClient(t, "")
	prefix := uniquePrefix(t)
	logs := &logCounter{}
	l := newLimiter(t, limiterOpts{redis: rc, prefix: prefix, retryEvery: 300 * time.Millisecond, logs: logs})
	replica := newLimiter(t, limiterOpts{redis: direct, prefix: prefix})
	ctx := context.Background()

	takeN(t, l, "a", 1)
	n, err := direct.Exists(ctx, prefix+":Test:a").Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "counted in Redis while it is up")
	assert.True(t, l.Healthy(ctx))

	proxy.Cut()
	before := cmds.n.Load()
	start := time.Now()
	takeN(t, l, "b", 3) // no error while Redis is down
	r, err := l.Take(ctx, "Test", "b")
	require.NoError(t, err)
	assert.True(t, r.Reached, "limits still apply during the outage")
	for i := range 100 {
		_, err := l.Take(ctx, "Test", "burst"+strconv.Itoa(i))
		require.NoError(t, err)
	}
	elapsed := time.Since(start)
	tries := cmds.n.Load() - before
	assert.LessOrEqual(t, tries, int64(elapsed/(300*time.Millisecond))+1,
		"Redis is tried at most once per RetryEvery while it is down (%d tries in %s)", tries, elapsed)
	assert.Equal(t, 1, logs.count(slog.LevelWarn), "a single WARN on the transition")
	assert.Zero(t, logs.count(slog.LevelInfo))
	n, _ = direct.Exists(ctx, prefix+":Test:b").Result()
	assert.Zero(t, n, "nothing reached Redis during the outage")
	assert.False(t, l.Healthy(ctx))

	proxy.Restore()
	require.Eventually(t, func() bool {
		if _, err := l.Take(ctx, "Test", "c"); err != nil {
			t.Errorf("take during recovery: %v", err)
			return false
		}
		n, _ := direct.Exists(ctx, prefix+":Test:c").Result()
		return n == 1
	}, 5*time.Second, 50*time.Millisecond, "Redis is used again once it is back")
	assert.Equal(t, 1, logs.count(slog.LevelInfo), "a single INFO when Redis is back")
	assert.Equal(t, 1, logs.count(slog.LevelWarn))
	assert.True(t, l.Healthy(ctx))

	// Shared with the other replica again.
	require.NoError(t, l.Reset(ctx, "Test", "d"))
	takeN(t, l, "d", 2)
	takeN(t, replica, "d", 1)
	r, err = l.Take(ctx, "Test", "d")
	require.NoError(t, err)
	assert.True(t, r.Reached, "after recovery the count is shared through Redis")
}

func TestConcurrentTakesAcrossAnOutage(t *testing.T) {
	rc, proxy := proxiedRedis(t)
	l := sharedLimiter(t, rc, uniquePrefix(t), "1000000-M")
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errs atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := l.Take(ctx, "Big", strconv.Itoa(g)); err != nil {
					errs.Add(1)
				}
			}
		}()
	}
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		proxy.Cut()
		time.Sleep(100 * time.Millisecond)
		proxy.Restore()
	}
	close(stop)
	wg.Wait()
	assert.Zero(t, errs.Load(), "no Take fails because of Redis")
}

func BenchmarkTakeRedis(b *testing.B) {
	rc, _ := redisClient(b, "")
	l, err := ratelimit.New(ratelimit.Options{Redis: rc, Prefix: uniquePrefix(b), Rates: map[string]string{"B": "1000000000-M"}})
	require.NoError(b, err)
	benchTake(b, l)
}

func BenchmarkTakeMemory(b *testing.B) {
	l, err := ratelimit.New(ratelimit.Options{Rates: map[string]string{"B": "1000000000-M"}})
	require.NoError(b, err)
	benchTake(b, l)
}

func benchTake(b *testing.B, l *ratelimit.Limiter) {
	ctx := context.Background()
	if _, err := l.Take(ctx, "B", "warm"); err != nil {
		b.Fatal(err)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Take(ctx, "B", "k"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := l.Take(ctx, "B", "k"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// sharedLimiter is a limiter of one limit "Big" at rate on rc, retrying a failed Redis after 50 ms.
func sharedLimiter(t *testing.T, rc *redis.Client, prefix, rate string) *ratelimit.Limiter {
	t.Helper()
	l, err := ratelimit.New(ratelimit.Options{Redis: rc, Prefix: prefix, Rates: map[string]string{"Big": rate},
		RetryEvery: 50 * time.Millisecond, Logger: slog.New(&logCounter{})})
	require.NoError(t, err)
	return l
}

// proxiedRedis is a client of the test Redis through a TCP proxy the test can cut.
func proxiedRedis(t *testing.T) (*redis.Client, *testutil.TCPProxy) {
	t.Helper()
	opts, err := redis.ParseURL(testutil.RedisURL())
	require.NoError(t, err)
	proxy := testutil.StartProxy(t, opts.Addr)
	rc, _ := redisClient(t, proxy.Addr)
	return rc, proxy
}

// TestLargeLimitsCostAFewRoundTrips: a limit of 1000 hits a minute is taken from Redis in shares:
// 300 hits cost a handful of commands, and every hit still counts exactly on this replica.
func TestLargeLimitsCostAFewRoundTrips(t *testing.T) {
	rc, cmds := redisClient(t, "")
	prefix := uniquePrefix(t)
	l := sharedLimiter(t, rc, prefix, "1000-M")
	ctx := context.Background()
	for i := range 300 {
		r, err := l.Take(ctx, "Big", "k")
		require.NoError(t, err)
		require.False(t, r.Reached)
		require.EqualValues(t, 999-i, r.Remaining, "hit %d", i+1)
		require.WithinDuration(t, time.Now().Add(time.Minute), r.Reset, 2*time.Second)
	}
	assert.Less(t, cmds.n.Load(), int64(20), "commands sent for 300 hits")
	shared, err := rc.Get(ctx, prefix+":Big:k").Int64()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, shared, int64(300), "the shared count includes this replica's share")
	assert.LessOrEqual(t, shared, int64(300+2*1000/16), "at most two shares (1000/16 each) unspent")

	require.NoError(t, l.Reset(ctx, "Big", "k"))
	r, err := l.Take(ctx, "Big", "k")
	require.NoError(t, err)
	assert.EqualValues(t, 999, r.Remaining, "a reset drops this replica's share too")
}

// TestSharesNeverAdmitMoreThanTheLimit: two replicas taking hits concurrently admit exactly the
// limit in a window (every share taken is spent, none exceeds what was left), then refuse.
func TestSharesNeverAdmitMoreThanTheLimit(t *testing.T) {
	prefix := uniquePrefix(t)
	rcA, _ := redisClient(t, "")
	rcB, _ := redisClient(t, "")
	replicas := []*ratelimit.Limiter{sharedLimiter(t, rcA, prefix, "500-M"), sharedLimiter(t, rcB, prefix, "500-M")}
	var admitted, refused atomic.Int64
	take := func(l *ratelimit.Limiter) bool {
		r, err := l.Take(context.Background(), "Big", "k")
		if !assert.NoError(t, err) || r.Reached {
			refused.Add(1)
			return false
		}
		admitted.Add(1)
		return true
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for refused.Load() < 100 {
				take(replicas[g%2])
			}
		}()
	}
	wg.Wait()
	// Spend what each replica still holds (a share fetched in the background may land late).
	for quiet := 0; quiet < 3; {
		before := admitted.Load()
		for _, l := range replicas {
			for take(l) {
			}
		}
		if admitted.Load() == before {
			quiet++
		}
		time.Sleep(20 * time.Millisecond)
	}
	assert.EqualValues(t, 500, admitted.Load())
}

// TestSharesEndWithTheWindow: once a window ends, hits are admitted again.
func TestSharesEndWithTheWindow(t *testing.T) {
	rc, _ := redisClient(t, "")
	l := sharedLimiter(t, rc, uniquePrefix(t), "40-S")
	ctx := context.Background()
	var last ratelimit.Result
	admitted := 0
	for range 200 {
		r, err := l.Take(ctx, "Big", "k")
		require.NoError(t, err)
		if r.Reached {
			last = r
			break
		}
		admitted++
	}
	require.True(t, last.Reached)
	require.Positive(t, admitted)
	time.Sleep(time.Until(last.Reset))
	r, err := l.Take(ctx, "Big", "k")
	require.NoError(t, err)
	assert.False(t, r.Reached, "a new window")
}

// TestSharesAcrossARedisOutage: a large limit keeps admitting without errors while Redis is cut
// (the share held, then the in-process store), still refuses past the limit, and takes its shares
// from Redis again once it is back.
func TestSharesAcrossARedisOutage(t *testing.T) {
	rc, proxy := proxiedRedis(t)
	direct, _ := redisClient(t, "")
	prefix := uniquePrefix(t)
	l := sharedLimiter(t, rc, prefix, "100-M")
	ctx := context.Background()
	take := func(key string) ratelimit.Result {
		r, err := l.Take(ctx, "Big", key)
		require.NoError(t, err)
		return r
	}
	require.False(t, take("a").Reached)

	proxy.Cut()
	admitted := 1
	for range 150 {
		if !take("a").Reached {
			admitted++
		}
	}
	assert.LessOrEqual(t, admitted, 100+6, "the limit applies during the outage (in process, plus the share held)")
	assert.GreaterOrEqual(t, admitted, 100)

	proxy.Restore()
	require.Eventually(t, func() bool {
		take("b")
		n, _ := direct.Exists(ctx, prefix+":Big:b").Result()
		return n == 1
	}, 5*time.Second, 50*time.Millisecond, "shares come from Redis again")
}
