package aikeys_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys"
	"provisioner/platform/testutil"
)

// trips records, in order, the round trips the app's Redis client makes (one command, or one
// pipeline) and the marks the test puts between them.
type trips struct {
	limits string // the rate limiter's key prefix

	mu     sync.Mutex
	events []string
}

func (r *trips) add(e string) { r.mu.Lock(); r.events = append(r.events, e); r.mu.Unlock() }

// since answers the events recorded after the i-th.
func (r *trips) since(i int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events[i:]...)
}

func (r *trips) len() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.events) }

// name is a command as recorded: its name, and for a script which one it runs (a budget's, or a
// rate limiter's share).
func (r *trips) name(c redis.Cmder) string {
	args := c.Args()
	n := strings.ToLower(c.Name())
	if (n == "evalsha" || n == "eval") && len(args) > 3 {
		switch {
		case args[1] == aikeys.ReserveScriptHash:
			return n + " reserve"
		case args[1] == aikeys.SettleScriptHash:
			return n + " settle"
		case strings.HasPrefix(fmt.Sprint(args[3]), r.limits):
			return n + " rate limit share"
		}
	}
	return n
}

func (r *trips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, c redis.Cmder) error {
		r.add("redis: " + r.name(c))
		return next(ctx, c)
	}
}

func (r *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cs []redis.Cmder) error {
		names := make([]string, len(cs))
		for i, c := range cs {
			names[i] = r.name(c)
		}
		r.add("redis: pipeline[" + strings.Join(names, ",") + "]")
		return next(ctx, cs)
	}
}

// TestBudgetReservationTrips counts the round trips the gateway's own Redis client makes while
// serving one generation, with the fake upstream marking when it is called and when it answered:
// a key with a token budget, and one whose owner also has a monthly ceiling, cost exactly one
// (the reservation script, one call for both counters) before the upstream is called, none between
// its answer and the response, and the settlement comes later in a batch; a key without budget
// (and an owner without ceiling) costs none. Each key's first generation is not counted: it takes
// the rate limiter's shares of its windows (one round trip per window for many requests, not
// counted either when a window ends during the counted one).
func TestBudgetReservationTrips(t *testing.T) {
	t.Parallel()
	prefix := "trips" + testutil.RandomSuffix()
	rec := &trips{limits: prefix + ":rl"}
	up := newUpstream(t, func(s *http.Server) {
		inner := s.Handler
		s.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			rec.add("upstream called")
			inner.ServeHTTP(w, req)
			rec.add("upstream answered")
		})
	})
	var budgets *aikeys.Budgets
	a := apptest.Start(t, apptest.With(map[string]any{"Ai:BaseUrl": up.URL, "Ai:ApiKey": upstreamKey, "Ai:DefaultModel": "fake-model",
		"Redis:KeyPrefix": prefix, "RateLimit:AiGenerate": "100000-M", "RateLimit:PerIp": "100000-M"}),
		apptest.WithFx(fx.Invoke(func(rc *redis.Client) { rc.AddHook(rec) }), fx.Populate(&budgets)))
	budgeted := map[string]any{"name": "budgeted", "policy": map[string]any{"tokenBudget": 1_000_000, "budgetPeriod": "month"}}
	capped := a.Register(t)
	r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", capped.ID), Token: a.AdminToken(t),
		Body: map[string]any{"aiMonthlyTokenBudget": 1_000_000}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	require.NoError(t, a.Bus.Sync(context.Background()))
	free := a.Register(t)

	for _, c := range []struct {
		name  string
		key   string
		trips int
	}{
		{"token budget", newKey(t, a, free.Token, budgeted).Key, 1},
		{"token budget and owner's ceiling", newKey(t, a, capped.Token, budgeted).Key, 1},
		{"no budget", newKey(t, a, free.Token, nil).Key, 0},
	} {
		require.Equal(t, http.StatusOK, generate(a, c.key).Status, c.name) // takes the rate limiter's shares
		budgets.Wait()
		start := rec.len()
		require.Equal(t, http.StatusOK, generate(a, c.key).Status, c.name)
		rec.add("response")
		budgets.Wait()
		ev := rec.since(start)
		called, answered, responded := index(ev, "upstream called"), index(ev, "upstream answered"), index(ev, "response")
		require.True(t, called >= 0 && called < answered && answered < responded, "%s: %q", c.name, ev)
		// A rate limiter's share serves many requests; one is taken here only when a window ends.
		before := without(ev[:called], "redis: evalsha rate limit share")
		between, after := ev[answered+1:responded], ev[responded+1:]
		between = without(between, "redis: evalsha settle") // the batch may be written before the client reads the answer
		if c.trips == 0 {
			assert.Empty(t, before, "%s: before the upstream", c.name)
			assert.Empty(t, after, "%s: after the response", c.name)
		} else {
			assert.Equal(t, []string{"redis: evalsha reserve"}, before, "%s: before the upstream", c.name)
			assert.Contains(t, append(ev[answered+1:responded:responded], after...), "redis: evalsha settle", "%s: settled in a batch", c.name)
		}
		assert.Empty(t, between, "%s: between the upstream's answer and the response", c.name)
		t.Logf("%s: %q", c.name, ev)
	}
}

func index(s []string, v string) int {
	for i, e := range s {
		if e == v {
			return i
		}
	}
	return -1
}

func without(s []string, v string) []string {
	var out []string
	for _, e := range s {
		if e != v {
			out = append(out, e)
		}
	}
	return out
}
