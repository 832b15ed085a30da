package ratelimit_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strconv"
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

func redisClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(testutil.RedisURL())
	require.NoError(t, err)
	if addr != "" {
		opts.Addr = addr
	}
	opts.DialTimeout, opts.ReadTimeout, opts.MaxRetries = 300*time.Millisecond, 300*time.Millisecond, 0
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

func newLimiter(t *testing.T, rc *redis.Client, prefix string) *ratelimit.Limiter {
	t.Helper()
	opts := ratelimit.Options{Prefix: prefix, Rates: map[string]string{"Test": "3-M"}, RetryEvery: 100 * time.Millisecond}
	if rc != nil {
		opts.Redis = rc
	}
	l, err := ratelimit.New(opts)
	require.NoError(t, err)
	return l
}

func TestLimitRefusesThePastTheLimitHit(t *testing.T) {
	for name, rc := range map[string]*redis.Client{"redis": redisClient(t, ""), "memory": nil} {
		t.Run(name, func(t *testing.T) {
			l := newLimiter(t, rc, "t"+testutil.RandomSuffix())
			ctx := context.Background()
			for i := 0; i < 3; i++ {
				r, err := l.Take(ctx, "Test", "k")
				require.NoError(t, err)
				assert.False(t, r.Reached)
				assert.EqualValues(t, 2-i, r.Remaining)
			}
			r, err := l.Take(ctx, "Test", "k")
			require.NoError(t, err)
			assert.True(t, r.Reached)
			assert.Zero(t, r.Remaining)
			other, _ := l.Take(ctx, "Test", "other")
			assert.False(t, other.Reached, "keys are independent")

			_, err = l.Enforce(ctx, "Test", "k")
			var le *ratelimit.LimitError
			require.ErrorAs(t, err, &le)
			assert.Positive(t, le.RetryAfter)

			require.NoError(t, l.Reset(ctx, "Test", "k"))
			r, _ = l.Take(ctx, "Test", "k")
			assert.False(t, r.Reached)
		})
	}
}

func TestReplicasShareTheCount(t *testing.T) {
	prefix := "t" + testutil.RandomSuffix()
	a, b := newLimiter(t, redisClient(t, ""), prefix), newLimiter(t, redisClient(t, ""), prefix)
	ctx := context.Background()
	for i, l := range []*ratelimit.Limiter{a, b, a} {
		r, err := l.Take(ctx, "Test", "k")
		require.NoError(t, err)
		require.False(t, r.Reached, "hit %d", i)
	}
	r, err := b.Take(ctx, "Test", "k")
	require.NoError(t, err)
	assert.True(t, r.Reached, "the hit past the limit is refused whichever replica takes it")
}

func TestBadRateNamesTheLimit(t *testing.T) {
	_, err := ratelimit.New(ratelimit.Options{Rates: map[string]string{"Login": "ten-per-minute"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "RateLimit:Login")
	_, err = ratelimit.New(ratelimit.Options{})
	require.NoError(t, err)
}

func TestUnknownLimitIsAnError(t *testing.T) {
	l := newLimiter(t, nil, "x")
	_, err := l.Take(context.Background(), "Nope", "k")
	assert.Error(t, err)
}

func TestMiddlewareHeadersAnd429(t *testing.T) {
	l := newLimiter(t, redisClient(t, ""), "t"+testutil.RandomSuffix())
	loose, err := ratelimit.New(ratelimit.Options{Prefix: "t" + testutil.RandomSuffix(), Rates: map[string]string{"Loose": "100-M"}})
	require.NoError(t, err)
	s, err := httpx.NewServer(httpx.ServerOptions{Title: "t", Version: "1", Before: []fiber.Handler{
		loose.Middleware("Loose", func(*fiber.Ctx) string { return "ip" }),
		l.Middleware("Test", func(*fiber.Ctx) string { return "ip" }),
	}})
	require.NoError(t, err)
	s.App.Get("/x", func(c *fiber.Ctx) error { return c.SendString("ok") })
	s.Finish()
	for i := 0; i < 3; i++ {
		res, err := s.App.Test(httptest.NewRequest("GET", "/x", nil))
		require.NoError(t, err)
		assert.Equal(t, 200, res.StatusCode)
		assert.Equal(t, "3", res.Header.Get("X-RateLimit-Limit"), "the tightest limit's headers")
		assert.Equal(t, strconv.Itoa(2-i), res.Header.Get("X-RateLimit-Remaining"))
		assert.Equal(t, "3;w=60", res.Header.Get("RateLimit-Policy"))
		assert.Contains(t, res.Header.Get("RateLimit"), "limit=3")
	}
	res, err := s.App.Test(httptest.NewRequest("GET", "/x", nil))
	require.NoError(t, err)
	assert.Equal(t, 429, res.StatusCode)
	ra, _ := strconv.Atoi(res.Header.Get("Retry-After"))
	assert.GreaterOrEqual(t, ra, 1)
	body, _ := io.ReadAll(res.Body)
	assert.Contains(t, string(body), `"success":false`)
}

func TestRedisDownAtStartupStillLimits(t *testing.T) {
	l := newLimiter(t, redisClient(t, "127.0.0.1:1"), "t"+testutil.RandomSuffix())
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		r, err := l.Take(ctx, "Test", "k")
		require.NoError(t, err)
		require.False(t, r.Reached)
	}
	r, err := l.Take(ctx, "Test", "k")
	require.NoError(t, err)
	assert.True(t, r.Reached, "the in-process fallback enforces the limit")
	assert.False(t, l.Healthy(ctx))
}

func TestRedisOutageMidRunFallsBackAndRecovers(t *testing.T) {
	opts, _ := redis.ParseURL(testutil.RedisURL())
	p := testutil.StartProxy(t, opts.Addr)
	rc := redisClient(t, p.Addr)
	direct := redisClient(t, "")
	prefix := "t" + testutil.RandomSuffix()
	l := newLimiter(t, rc, prefix)
	ctx := context.Background()

	_, err := l.Take(ctx, "Test", "a")
	require.NoError(t, err)
	keys, _ := direct.Keys(ctx, prefix+"*").Result()
	require.NotEmpty(t, keys, "counted in Redis while it is up")

	p.Cut()
	for i := 0; i < 3; i++ {
		r, err := l.Take(ctx, "Test", "b")
		require.NoError(t, err, "no error while Redis is down")
		require.False(t, r.Reached)
	}
	r, err := l.Take(ctx, "Test", "b")
	require.NoError(t, err)
	assert.True(t, r.Reached, "limits still apply during the outage")

	p.Restore()
	require.Eventually(t, func() bool {
		_, err := l.Take(ctx, "Test", "c")
		if err != nil {
			return false
		}
		n, _ := direct.Exists(ctx, prefix+":Test:c").Result()
		return n == 1
	}, 5*time.Second, 150*time.Millisecond, "Redis is used again once it is back")
}

func BenchmarkTakeRedis(b *testing.B) {
	opts, _ := redis.ParseURL(testutil.RedisURL())
	rc := redis.NewClient(opts)
	defer rc.Close()
	l, _ := ratelimit.New(ratelimit.Options{Redis: rc, Prefix: "bench" + testutil.RandomSuffix(), Rates: map[string]string{"B": "1000000000-M"}})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, _ = l.Take(ctx, "B", "k")
	}
}

func BenchmarkTakeMemory(b *testing.B) {
	l, _ := ratelimit.New(ratelimit.Options{Rates: map[string]string{"B": "1000000000-M"}})
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		_, _ = l.Take(ctx, "B", "k")
	}
}
