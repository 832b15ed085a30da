package auth_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/platform/secrets"
	"provisioner/platform/testutil"
)

// noLoginLimit lets the lockout, not RateLimit:Login or LoginPerIp, decide.
var noLoginLimit = map[string]any{"RateLimit:Login": "10000-M", "RateLimit:LoginPerIp": "10000-M", "RateLimit:PerIp": "100000-M"}

func retryAfter(t *testing.T, r *apptest.Resp) int {
	t.Helper()
	n, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After of %s", r.Raw)
	return n
}

// TestParallelWrongPasswordsRunAtMostThresholdHashes: 50 wrong passwords sent at once, for a known
// and an unknown email, run no more password hashes than Auth:LockoutThreshold allows; the rest are
// 429 with Retry-After, the same answer for both emails.
func TestParallelWrongPasswordsRunAtMostThresholdHashes(t *testing.T) {
	var hasher *secrets.Hasher
	kv := map[string]any{"Auth:LockoutDelaySeconds": 600} // no attempt of the burst outlasts the wait
	for k, v := range noLoginLimit {
		kv[k] = v
	}
	a := apptest.Start(t, apptest.With(kv), apptest.WithFx(fx.Populate(&hasher)))
	u, _ := register(t, a)
	for _, email := range []string{u.Email, "nobody-" + testutil.RandomSuffix() + "@example.test"} {
		before := hasher.Taken()
		got := make([]*apptest.Resp, 50)
		var wg sync.WaitGroup
		for i := range got {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = a.Post("/api/auth/login", "", map[string]any{"email": email, "password": "wrong-password-" + strconv.Itoa(i)})
			}()
		}
		wg.Wait()
		statuses := map[int]int{}
		for _, r := range got {
			statuses[r.Status]++
			if r.Status == http.StatusTooManyRequests {
				assert.Contains(t, r.Env.Message, "Too many failed attempts; try again in ")
				assert.InDelta(t, 600, retryAfter(t, r), 60)
			}
		}
		assert.Equal(t, map[int]int{http.StatusUnauthorized: 10, http.StatusTooManyRequests: 40}, statuses, email)
		assert.EqualValues(t, 10, hasher.Taken()-before, "hash checks for %s", email)
	}
}

// elapse ends the wait the lockout set for email, as time passing would: the delays are long
// (a minute), so that no assertion depends on how fast a loaded machine answers.
func elapse(t *testing.T, a *apptest.App, email string) {
	t.Helper()
	require.NoError(t, a.Redis.HSet(context.Background(), a.Cfg.Redis.KeyPrefix+":lock:pw:"+email, "u", 0).Err())
}

// TestLockoutDelayDoublesAndASuccessForgetsIt: past the threshold each failure doubles the wait;
// an attempt that waited it is checked (the right password signs in) and forgets the failures.
func TestLockoutDelayDoublesAndASuccessForgetsIt(t *testing.T) {
	kv := map[string]any{"Auth:LockoutThreshold": 2, "Auth:LockoutDelaySeconds": 60}
	for k, v := range noLoginLimit {
		kv[k] = v
	}
	a := apptest.Start(t, apptest.With(kv))
	u, _ := register(t, a)
	wrong := map[string]any{"email": u.Email, "password": "not-the-password"}
	require.Equal(t, http.StatusUnauthorized, a.Post("/api/auth/login", "", wrong).Status)
	require.Equal(t, http.StatusUnauthorized, a.Post("/api/auth/login", "", wrong).Status)
	r := a.Post("/api/auth/login", "", wrong)
	require.Equal(t, http.StatusTooManyRequests, r.Status, string(r.Raw))
	assert.InDelta(t, 60, retryAfter(t, r), 10)
	r = a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password})
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "the right password waits too: it is not checked")

	elapse(t, a, u.Email)
	require.Equal(t, http.StatusUnauthorized, a.Post("/api/auth/login", "", wrong).Status, "checked after the wait")
	r = a.Post("/api/auth/login", "", wrong)
	require.Equal(t, http.StatusTooManyRequests, r.Status)
	assert.InDelta(t, 120, retryAfter(t, r), 10, "the wait doubled")

	elapse(t, a, u.Email)
	login(t, a, u.Email, u.Password)
	require.Equal(t, http.StatusUnauthorized, a.Post("/api/auth/login", "", wrong).Status, "the success forgot the failures")
	require.Equal(t, http.StatusUnauthorized, a.Post("/api/auth/login", "", wrong).Status, "counted from one again")
	var n int
	require.NoError(t, a.DB.QueryRowContext(context.Background(),
		"SELECT count(*) FROM audit_events WHERE action = 'user.login.locked' AND details->>'email' = ?", u.Email).Scan(&n))
	assert.Equal(t, 3, n, "each failure that set a wait is audited")
}

// TestLockoutIsSharedByReplicas: the failures are counted in Redis, so replicas hold an account's
// attempts back together.
func TestLockoutIsSharedByReplicas(t *testing.T) {
	kv := map[string]any{"Redis:KeyPrefix": "lockout" + testutil.RandomSuffix(), "Auth:LockoutThreshold": 3, "Auth:LockoutDelaySeconds": 600}
	for k, v := range noLoginLimit {
		kv[k] = v
	}
	one := apptest.Start(t, apptest.With(kv))
	two := apptest.Start(t, apptest.With(kv))
	u, _ := register(t, one)
	wrong := map[string]any{"email": u.Email, "password": "not-the-password"}
	got := []int{
		one.Post("/api/auth/login", "", wrong).Status,
		two.Post("/api/auth/login", "", wrong).Status,
		one.Post("/api/auth/login", "", wrong).Status,
		two.Post("/api/auth/login", "", wrong).Status,
	}
	assert.Equal(t, []int{401, 401, 401, 429}, got)
}
