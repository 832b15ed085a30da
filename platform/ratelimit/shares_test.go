package ratelimit_test

import (
	"context"
	"log/slog"
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
