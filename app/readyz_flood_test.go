package app_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/ops"
	"provisioner/platform/testutil"
)

// slowPings counts the PING commands of a Redis client and makes each take 100 ms, so that
// readiness checks started together overlap.
type slowPings struct{ n atomic.Int64 }

func (h *slowPings) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slowPings) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *slowPings) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "ping" {
			h.n.Add(1)
			time.Sleep(100 * time.Millisecond)
		}
		return next(ctx, cmd)
	}
}

// A flood of /readyz (public, not rate limited) does not make a round of pings per request:
// checks at the same time share one, so 40 at once cost a control database connection and a Redis
// round trip or two, not 40 of each taken from the API's pools; and each still gets the truth.
func TestReadinessChecksAtOnceShareOneRoundOfPings(t *testing.T) {
	a := apptest.Start(t)
	opts, err := redis.ParseURL(testutil.RedisURL())
	require.NoError(t, err)
	rc := redis.NewClient(opts)
	t.Cleanup(func() { _ = rc.Close() })
	pings := &slowPings{}
	rc.AddHook(pings)
	o := ops.New(a.DB, rc, nil, nil, nil)

	const callers = 40
	start := make(chan struct{})
	var wg sync.WaitGroup
	results := make([]ops.Health, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = o.Check(context.Background())
		}()
	}
	close(start)
	wg.Wait()
	assert.LessOrEqual(t, pings.n.Load(), int64(3), "checks at the same time share their pings")
	for _, h := range results {
		require.NotNil(t, h.Checks)
		assert.Equal(t, "ok", h.Status)
		assert.Equal(t, "ok", h.Checks.Redis)
		assert.Equal(t, "ok", h.Checks.Database)
	}

	// One after the other, each check pings again: nothing is cached.
	before := pings.n.Load()
	o.Check(context.Background())
	o.Check(context.Background())
	assert.Equal(t, before+2, pings.n.Load())
}
