package auth_test

import (
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// Forgot-password must not tell by its time whether an account exists: for a known account the
// token and the audit event are written in the background, after the answer. The medians of many
// requests, known and unknown interleaved, must be close; the bound is tolerant (the background
// work takes several milliseconds, well past it).
func TestForgotPasswordTimeDoesNotTellAccountsApart(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:ForgotPassword": "1000-H", "RateLimit:ForgotPasswordPerIp": "1000-H", "RateLimit:PerIp": "10000-M"}))
	const n = 40
	suffix := testutil.RandomSuffix()
	known := make([]string, n)
	for i := range known {
		known[i] = fmt.Sprintf("timing-%s-%d@example.test", suffix, i)
		_, err := a.DB.Exec(`INSERT INTO users (email, full_name, role, security_stamp, password_hash) VALUES (?, 'Timing', 'User', 1, 'x')`, known[i])
		require.NoError(t, err)
	}
	ask := func(addr string) time.Duration {
		start := time.Now()
		r := a.Do(apptest.Request{Method: http.MethodPost, Path: "/api/auth/forgot-password", Body: map[string]any{"email": addr}, SkipSync: true})
		took := time.Since(start)
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		return took
	}
	// Warm up the connections and the lookup's plan.
	for i := 0; i < 5; i++ {
		ask(fmt.Sprintf("warm-%s-%d@example.test", suffix, i))
	}
	var k, u []time.Duration
	for i := 0; i < n; i++ {
		k = append(k, ask(known[i]))
		u = append(u, ask(fmt.Sprintf("nobody-%s-%d@example.test", suffix, i)))
		time.Sleep(5 * time.Millisecond) // let the background work of the last one finish
	}
	mk, mu := median(k), median(u)
	t.Logf("median known %v, unknown %v", mk, mu)
	assert.LessOrEqual(t, mk, mu+mu/2+time.Millisecond, "a known account's answer takes longer: %v against %v", mk, mu)
	assert.LessOrEqual(t, mu, mk+mk/2+time.Millisecond, "an unknown email's answer takes longer: %v against %v", mu, mk)
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
