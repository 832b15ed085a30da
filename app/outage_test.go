package app_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/testutil"
	"provisioner/platform/testutil/apptest"
)

// TestDependencyOutagesMidLoad cuts Redis, then the control database, then makes the database hang,
// while requests keep coming (through TCP proxies, so the shared services stay up): no answer is a
// 500, none waits for ever, /readyz tells the truth, and the service recovers without a restart.
func TestDependencyOutagesMidLoad(t *testing.T) {
	ctl, err := url.Parse(testutil.PackageDatabase(t))
	require.NoError(t, err)
	pg := testutil.StartProxy(t, ctl.Host)
	ctl.Host = pg.Addr
	rurl, err := url.Parse(testutil.RedisURL())
	require.NoError(t, err)
	rd := testutil.StartProxy(t, rurl.Host)
	rurl.Host = rd.Addr
	a := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:Control": ctl.String(), "Redis:Url": rurl.String(),
		"RateLimit:Login": "3-M"}))
	u := a.Register(t)
	statuses := func(n int) map[int]int {
		out := map[int]int{}
		for i := 0; i < n; i++ {
			out[a.Get("/api/me", u.Token).Status]++
			out[a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": "wrong-password"}).Status]++
		}
		return out
	}

	// Redis goes away mid-load: requests are served, limits still apply in-process.
	rd.Cut()
	got := statuses(4)
	assert.Zero(t, got[http.StatusInternalServerError], "%v", got)
	assert.Equal(t, 4, got[http.StatusOK], "%v", got)
	assert.Positive(t, got[http.StatusTooManyRequests], "the login limit still holds: %v", got)
	r := a.Get("/readyz", "")
	assert.Equal(t, http.StatusServiceUnavailable, r.Status)
	assert.Contains(t, string(r.Raw), `"redis":"down"`)
	rd.Restore()
	require.Eventually(t, func() bool { return a.Get("/readyz", "").Status == http.StatusOK }, 10*time.Second, 200*time.Millisecond)

	// The control database goes away: 503s, never 500s; then it is back without a restart.
	pg.Cut()
	got = map[int]int{}
	for i := 0; i < 5; i++ {
		got[a.Get("/api/me", u.Token).Status]++
		got[a.Get("/api/users", a.AdminTokenOrEmpty()).Status]++
	}
	assert.Zero(t, got[http.StatusInternalServerError], "%v", got)
	assert.Positive(t, got[http.StatusServiceUnavailable], "%v", got)
	r = a.Get("/readyz", "")
	assert.Equal(t, http.StatusServiceUnavailable, r.Status)
	assert.Contains(t, string(r.Raw), `"database":"down"`)
	pg.Restore()
	require.Eventually(t, func() bool { return a.Get("/api/me", u.Token).Status == http.StatusOK }, 15*time.Second, 200*time.Millisecond,
		"recovers without a restart")
	assert.Equal(t, http.StatusOK, a.Get("/readyz", "").Status)

	// The control database hangs (connections open, nothing answers): each request still ends,
	// with a 503 once the database I/O bound (5 s) passes, not a 500 and not never.
	pg.Stall()
	for i := 0; i < 2; i++ {
		start := time.Now()
		r := a.Get("/api/me", u.Token)
		assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%s", r.Raw)
		assert.Less(t, time.Since(start), 12*time.Second)
	}
	r = a.Get("/readyz", "")
	assert.Equal(t, http.StatusServiceUnavailable, r.Status)
	assert.Contains(t, string(r.Raw), `"database":"down"`)
	pg.Flow()
	require.Eventually(t, func() bool { return a.Get("/api/me", u.Token).Status == http.StatusOK }, 20*time.Second, 200*time.Millisecond,
		"recovers once the database answers")
}
