package ratelimit_test

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/ratelimit"
	"provisioner/platform/testutil"
)

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
