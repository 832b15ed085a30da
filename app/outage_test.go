package app_test

import (
	"database/sql"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
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
	assertNotReady(t, a, "redis")
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
	assertNotReady(t, a, "database")
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
	assertNotReady(t, a, "database")
	pg.Flow()
	require.Eventually(t, func() bool { return a.Get("/api/me", u.Token).Status == http.StatusOK }, 20*time.Second, 200*time.Millisecond,
		"recovers once the database answers")
}

// TestControlDatabaseRestartMidLoad stops and starts a real PostgreSQL server (a private cluster,
// so the shared one stays up) while clients keep reading and writing: sessions are terminated the
// way an operator's restart terminates them (SQLSTATE 57P01), new connections are refused
// meanwhile (57P03, then connection refused). No answer is a 500, /readyz says the database is
// down while it is, and the service recovers on its own when the server is back.
func TestControlDatabaseRestartMidLoad(t *testing.T) {
	pg := testutil.StartCluster(t)
	a := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:Control": pg.URL("control"),
		"RateLimit:PerIp": "1000000-M", "RateLimit:PerUser": "1000000-M", "AiKeys:MaxPerUser": 100000}))
	u := a.Register(t)

	var mu sync.Mutex
	statuses := map[int]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	load := func(method, path, body string) {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			req, _ := http.NewRequest(method, a.URL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+u.Token)
			req.Header.Set("Content-Type", "application/json")
			status := -1 // the request itself failed
			if res, err := client.Do(req); err == nil {
				status = res.StatusCode
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			mu.Lock()
			statuses[status]++
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
		}
	}
	wg.Add(5)
	go load(http.MethodGet, "/api/me", "")
	go load(http.MethodGet, "/api/me/databases", "")
	for i := 0; i < 3; i++ {
		go load(http.MethodPost, "/api/me/ai-keys", `{"name":"written during a restart"}`)
	}
	time.Sleep(300 * time.Millisecond)

	// Writers past authentication wait on a lock, so the restart terminates their statements
	// mid-request (57P01 inside the handler, not only at the principal lookup).
	locker, err := sql.Open("pgx", pg.URL("control"))
	require.NoError(t, err)
	defer locker.Close()
	tx, err := locker.Begin()
	require.NoError(t, err)
	defer func() { _ = tx.Rollback() }()
	_, err = tx.Exec("LOCK TABLE ai_keys IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	time.Sleep(300 * time.Millisecond)

	pg.Stop()
	assertNotReady(t, a, "database")
	time.Sleep(500 * time.Millisecond)
	pg.Start()
	require.Eventually(t, func() bool { return a.Get("/readyz", "").Status == http.StatusOK }, 15*time.Second, 100*time.Millisecond,
		"/readyz recovers")
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	t.Logf("statuses: %v", statuses)
	assert.Zero(t, statuses[http.StatusInternalServerError], "no 500 while the database restarts: %v", statuses)
	assert.Zero(t, statuses[-1], "every request got an answer: %v", statuses)
	assert.Positive(t, statuses[http.StatusServiceUnavailable], "requests during the outage answer 503: %v", statuses)
	assert.Equal(t, http.StatusOK, a.Get("/api/me", u.Token).Status, "served again without a restart")
}

// assertNotReady: /readyz answers 503 and names dep as down.
func assertNotReady(t *testing.T, a *apptest.App, dep string) {
	t.Helper()
	r := a.Get("/readyz", "")
	assert.Equal(t, http.StatusServiceUnavailable, r.Status)
	assert.Contains(t, string(r.Raw), `"`+dep+`":"down"`)
}
