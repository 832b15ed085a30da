package aikeys_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys/aikeystest"
	"provisioner/platform/testutil"
)

// budgetApps starts two replicas over the same database and Redis, both relaying to up.
func budgetApps(t *testing.T, up *aikeystest.Upstream) (*apptest.App, *apptest.App) {
	kv := map[string]any{"Ai:BaseUrl": up.URL, "Ai:ApiKey": upstreamKey, "Ai:DefaultModel": "fake-model", "Ai:TimeoutSeconds": 5,
		"Redis:KeyPrefix": "aibudget" + testutil.RandomSuffix(), "RateLimit:AiGenerate": "100000-M", "RateLimit:PerIp": "100000-M"}
	return apptest.Start(t, apptest.With(kv)), apptest.Start(t, apptest.With(kv))
}

// setBudget sets a key's budgets (0: none) as PATCH would, and waits for both replicas to see it.
func setBudget(t *testing.T, a, b *apptest.App, keyID, tokens, requests int64, period string) {
	null := func(n int64) any {
		if n == 0 {
			return nil
		}
		return n
	}
	_, err := a.DB.Exec("UPDATE ai_keys SET token_budget = ?, request_budget = ?, budget_period = ? WHERE id = ?", null(tokens), null(requests), period, keyID)
	require.NoError(t, err)
	require.NoError(t, a.Bus.Sync(context.Background()))
	require.NoError(t, b.Bus.Sync(context.Background()))
}

// spent reads what the key spent in its period from Redis: tokens and requests.
func spent(t *testing.T, a *apptest.App, keyID int64, period string) (int64, int64) {
	return counted(t, a, strconv.FormatInt(keyID, 10), period)
}

// counted reads a budget counter of Redis (a key id, or u and a user id): tokens and requests.
func counted(t *testing.T, a *apptest.App, name, period string) (int64, int64) {
	tag := "all"
	now := time.Now().UTC()
	switch period {
	case "day":
		tag = "d" + now.Format("20060102")
	case "month":
		tag = "m" + now.Format("200601")
	}
	opts, err := redis.ParseURL(testutil.RedisURL())
	require.NoError(t, err)
	rc := redis.NewClient(opts) // the app's own is closed once it stopped
	defer rc.Close()
	v, err := rc.HMGet(context.Background(), fmt.Sprintf("%s:aibudget:%s:%s", a.Cfg.Redis.KeyPrefix, name, tag), "t", "r").Result()
	require.NoError(t, err)
	n := func(x any) int64 { s, _ := x.(string); i, _ := strconv.ParseInt(s, 10, 64); return i }
	return n(v[0]), n(v[1])
}

// storm sends n requests at once, alternating replicas and routes, and counts the statuses; every
// 429 must name the budget (say refusal) and carry a Retry-After (the period's end).
func storm(t *testing.T, one, two *apptest.App, key string, n int, refusal string) map[int]int {
	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := one
			if i%2 == 1 {
				a = two
			}
			<-start
			var status int
			var retry, body string
			if i%4 < 2 {
				r := generate(a, key)
				status, retry, body = r.Status, r.Header.Get("Retry-After"), r.Env.Message
			} else {
				req, _ := http.NewRequest("POST", a.URL+"/api/ai/v1/chat/completions",
					bytes.NewReader([]byte(`{"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				res, err := http.DefaultClient.Do(req)
				if !assert.NoError(t, err) {
					return
				}
				var b bytes.Buffer
				_, _ = b.ReadFrom(res.Body)
				res.Body.Close()
				status, retry, body = res.StatusCode, res.Header.Get("Retry-After"), b.String()
			}
			if status == http.StatusTooManyRequests {
				assert.Contains(t, body, refusal)
				s, err := strconv.Atoi(retry)
				assert.NoError(t, err)
				assert.True(t, s >= 1 && s <= 31*86400, "Retry-After %q at the period's end", retry)
			}
			mu.Lock()
			got[status]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return got
}

// keyRefusal is what a key budget's 429 says.
const keyRefusal = "budget of this key reached"

// TestBudgetsHoldUnderConcurrencyOnTwoReplicas: 200 requests at once, on two replicas and both
// routes, against a budget for 20: exactly 20 reach the upstream for a request budget, and for a
// token budget what the upstream reported never passes it; what Redis counts is exactly what the
// upstream reported.
func TestBudgetsHoldUnderConcurrencyOnTwoReplicas(t *testing.T) {
	up := newUpstream(t)
	one, two := budgetApps(t, up)
	u := one.Register(t)
	k := newKey(t, one, u.Token, nil)

	setBudget(t, one, two, k.ID, 0, 20, "day")
	got := storm(t, one, two, k.Key, 200, keyRefusal)
	assert.Equal(t, map[int]int{200: 20, 429: 180}, got)
	assert.Equal(t, 20, up.Served(), "the upstream saw 20 requests, not one more")

	// A token budget for 20 requests' worst case (prompt estimate + max_tokens 10), on a key of its own.
	k2 := newKey(t, one, u.Token, map[string]any{"name": "tokens"})
	const budget = 20 * 42
	setBudget(t, one, two, k2.ID, budget, 0, "month")
	served := up.Served()
	got = storm(t, one, two, k2.Key, 200, keyRefusal)
	n := up.Served() - served
	assert.Equal(t, n, got[200])
	assert.Equal(t, 200-n, got[429])
	assert.GreaterOrEqual(t, n, 20)
	assert.LessOrEqual(t, int64(n*13), int64(budget), "spent at most the budget")

	// Settled exactly to what the upstream reported (13 tokens each), once both replicas stopped.
	one.Stop()
	two.Stop()
	tokens, requests := spent(t, one, k.ID, "day")
	assert.Equal(t, int64(20*13), tokens)
	assert.Equal(t, int64(20), requests)
	tokens, requests = spent(t, one, k2.ID, "month")
	assert.Equal(t, int64(n*13), tokens, "exactly accounted")
	assert.Equal(t, int64(n), requests)
}

// TestBudgetSettlesStreamsAndReleasesFailures: a stream is settled to its usage chunk, a client
// that leaves mid-stream is charged what was generated, and an upstream failure gives the
// reservation back.
func TestBudgetSettlesStreamsAndReleasesFailures(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	one, two := budgetApps(t, up)
	u := one.Register(t)
	k := newKey(t, one, u.Token, nil)
	setBudget(t, one, two, k.ID, 100000, 0, "none")

	res, body := chatRaw(t, one, k.Key, streamBody(nil))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	up.Set(func(b *aikeystest.Behaviour) { b.Fail = http.StatusServiceUnavailable })
	res, body = chatRaw(t, two, k.Key, streamBody(nil))
	require.Equal(t, http.StatusBadGateway, res.StatusCode, body)
	r := generate(one, k.Key)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	up.Set(func(b *aikeystest.Behaviour) { b.Fail = 0 })

	one.Stop()
	two.Stop()
	tokens, requests := spent(t, one, k.ID, "none")
	assert.Equal(t, int64(9), tokens, "the stream's usage chunk (7 + 2); the failures released")
	assert.Equal(t, int64(1), requests)
}

// TestUserCeilingHoldsAcrossKeysOnTwoReplicas: an admin's aiMonthlyTokenBudget (PUT /api/users/{id})
// bounds the user's keys together, a key without a budget of its own included: 200 requests at
// once over two keys, two replicas and both routes spend at most the ceiling, and the user's
// counter holds exactly what the upstream reported (as do the keys').
func TestUserCeilingHoldsAcrossKeysOnTwoReplicas(t *testing.T) {
	up := newUpstream(t)
	one, two := budgetApps(t, up)
	u := one.Register(t)
	free := newKey(t, one, u.Token, nil)
	own := newKey(t, one, u.Token, map[string]any{"name": "budgeted", "policy": map[string]any{"tokenBudget": 1000000, "budgetPeriod": "day"}})

	const ceiling = 20 * 42
	r := one.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", u.ID), Token: one.AdminToken(t),
		Body: map[string]any{"aiMonthlyTokenBudget": ceiling}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var view struct {
		AiMonthlyTokenBudget *int64 `json:"aiMonthlyTokenBudget"`
	}
	r.Decode(t, &view)
	require.NotNil(t, view.AiMonthlyTokenBudget)
	assert.Equal(t, int64(ceiling), *view.AiMonthlyTokenBudget)
	require.NoError(t, two.Bus.Sync(context.Background()))

	var mu sync.Mutex
	got := map[int]int{}
	var wg sync.WaitGroup
	for _, k := range []keyView{free, own} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := storm(t, one, two, k.Key, 100, "Monthly token budget of this user reached")
			mu.Lock()
			defer mu.Unlock()
			for s, n := range g {
				got[s] += n
			}
		}()
	}
	wg.Wait()
	n := up.Served()
	assert.Equal(t, n, got[200])
	assert.Equal(t, 200-n, got[429])
	assert.GreaterOrEqual(t, n, 20)
	assert.LessOrEqual(t, int64(n*13), int64(ceiling), "spent at most the ceiling")

	one.Stop()
	two.Stop()
	tokens, requests := counted(t, one, fmt.Sprintf("u%d", u.ID), "month")
	assert.Equal(t, int64(n*13), tokens, "exactly accounted")
	assert.Equal(t, int64(n), requests)
	_, freeRequests := spent(t, one, free.ID, "none")
	assert.Zero(t, freeRequests, "a key without a budget has no counter of its own")
	tokens, requests = spent(t, one, own.ID, "day")
	assert.Equal(t, tokens, requests*13, "the budgeted key's own counter, settled too")
}
