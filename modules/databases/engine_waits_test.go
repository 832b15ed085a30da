package databases_test

import (
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// TestHungEngineLeavesTheControlPoolToOtherRoutes: a create, pause or delete holds a control
// database connection (the row's transaction) while it waits for the engine, up to the engine
// timeout. With the engine hung, more such requests at once than the control pool has
// connections (32) took every connection, and every route (each needs the control database)
// waited with them: GET /api/me did not answer. The requests that may wait for an engine at once
// are now bounded (Databases:MaxEngineWaits); one past the bound waits a second for a slot, then
// is 503 with Retry-After, having stored nothing.
func TestHungEngineLeavesTheControlPoolToOtherRoutes(t *testing.T) {
	cfg, err := mysql.ParseDSN(testutil.TenantMysqlDSN())
	require.NoError(t, err)
	proxy := testutil.StartProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr
	a := start(t, map[string]any{"ConnectionStrings:TenantMysql": cfg.FormatDSN(), "Databases:MaxPerUser": 100})
	u := a.Register(t)
	var before int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM database_instances WHERE user_id = ?", u.ID).Scan(&before))

	proxy.Stall() // the MariaDB server hangs
	defer proxy.Flow()
	const n = 40 // more than the control pool's 32 connections
	statuses := make([]int, n)
	retryAfter := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := a.Do(apptest.Request{Method: http.MethodPost, Path: "/api/me/databases", Token: u.Token,
				Body: map[string]any{"engine": "mysql", "name": "hung " + strconv.Itoa(i)}, SkipSync: true})
			statuses[i], retryAfter[i] = r.Status, r.Header.Get("Retry-After")
		}()
	}
	time.Sleep(2 * time.Second) // every create has reached the engine, or been refused

	for _, path := range []string{"/api/me", "/api/me/databases"} {
		began := time.Now()
		done := make(chan int, 1)
		go func() {
			done <- a.Do(apptest.Request{Method: http.MethodGet, Path: path, Token: u.Token, SkipSync: true}).Status
		}()
		select {
		case status := <-done:
			assert.Equal(t, http.StatusOK, status, path)
			assert.Less(t, time.Since(began), 3*time.Second, "%s answers while the engine hangs", path)
		case <-time.After(5 * time.Second):
			t.Errorf("%s did not answer within 5 s while %d creates waited for a hung engine", path, n)
		}
	}
	wg.Wait()

	// The creates past the bound were refused at once with a 503 and Retry-After, and stored
	// nothing; the others stored their intent.
	refused := 0
	for i, s := range statuses {
		if s == http.StatusServiceUnavailable {
			refused++
			assert.NotEmpty(t, retryAfter[i], "a 503 says when to try again")
		}
	}
	assert.Positive(t, refused, "creates past the bound are refused: %v", statuses)
	var after int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM database_instances WHERE user_id = ?", u.ID).Scan(&after))
	assert.Equal(t, n-refused, after-before, "a refused create stores nothing")
}

// TestEngineSlotsRefuseSoonButNeverARegistration: with every engine-wait slot taken (one here),
// a create is 503 with Retry-After after a second and stores nothing, while a registration still
// answers 201 without waiting for the engine: its first database is stored (Provisioning) and
// left to the finisher.
func TestEngineSlotsRefuseSoonButNeverARegistration(t *testing.T) {
	cfg, err := mysql.ParseDSN(testutil.TenantMysqlDSN())
	require.NoError(t, err)
	proxy := testutil.StartProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr
	a := start(t, map[string]any{"ConnectionStrings:TenantMysql": cfg.FormatDSN(), "Databases:DefaultEngine": "mysql",
		"Databases:MaxEngineWaits": 1, "Databases:MaxPerUser": 10})
	u := a.Register(t)

	proxy.Stall() // the MariaDB server hangs
	defer proxy.Flow()
	done := make(chan int, 1)
	go func() {
		done <- a.Do(apptest.Request{Method: http.MethodPost, Path: "/api/me/databases", Token: u.Token,
			Body: map[string]any{"engine": "mysql"}, SkipSync: true}).Status
	}()
	count := func(userID int64) (n int) {
		require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM database_instances WHERE user_id = ? AND status = 'Provisioning'",
			userID).Scan(&n))
		return n
	}
	require.Eventually(t, func() bool { return count(u.ID) == 1 }, 10*time.Second, 20*time.Millisecond,
		"the first create holds the only slot, waiting for the engine")

	began := time.Now()
	r := a.Do(apptest.Request{Method: http.MethodPost, Path: "/api/me/databases", Token: u.Token,
		Body: map[string]any{"engine": "mysql"}, SkipSync: true})
	assert.Equal(t, http.StatusServiceUnavailable, r.Status, string(r.Raw))
	assert.Less(t, time.Since(began), 5*time.Second, "refused without waiting for the engine")
	assert.Equal(t, "5", r.Header.Get("Retry-After"))
	assert.Equal(t, 1, count(u.ID), "the refused create stored nothing")

	began = time.Now()
	r = a.Post("/api/auth/register", "", map[string]any{"fullName": "Slot Less", "organization": "Tests",
		"email": "slotless-" + testutil.RandomSuffix() + "@example.test", "password": "Tr0ub4dor&3-" + testutil.RandomSuffix()})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	assert.Less(t, time.Since(began), 5*time.Second, "the registration did not wait for the hung engine")
	var reg struct {
		UserID         int64 `json:"userId"`
		TenantDatabase *item `json:"tenantDatabase"`
	}
	r.Decode(t, &reg)
	require.NotNil(t, reg.TenantDatabase, "the registration's database is stored")
	assert.Equal(t, "Provisioning", reg.TenantDatabase.Status)
	assert.Equal(t, 1, count(reg.UserID), "left to the finisher")
	assert.Equal(t, http.StatusBadGateway, <-done, "the create that held the slot timed out on the engine")
}
