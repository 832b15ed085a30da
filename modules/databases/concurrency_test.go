package databases_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/testutil/apptest"
)

// parallel sends n requests at once and returns their answers.
func parallel(n int, send func() *apptest.Resp) []*apptest.Resp {
	out := make([]*apptest.Resp, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = send()
		}()
	}
	wg.Wait()
	return out
}

func audited(t *testing.T, a *apptest.App, action string, id int64) int {
	t.Helper()
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = ? AND target_id = ?", action, fmt.Sprint(id)).Scan(&n))
	return n
}

// waitForEngineLock waits until a statement starting with prefix waits for a lock on the tenant
// PostgreSQL cluster.
func waitForEngineLock(t *testing.T, prefix string) {
	pool := enginePool(t, "postgres")
	assert.Eventually(t, func() bool {
		var waiting bool
		_ = pool.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE $1)`, prefix+"%").Scan(&waiting)
		return waiting
	}, 10*time.Second, 50*time.Millisecond, "%s waits on the engine", prefix)
}

// holdInTx runs stmt on the tenant PostgreSQL cluster in a transaction left open, so the locks it
// took are held until the caller rolls back (or the test ends).
func holdInTx(t *testing.T, stmt string) *sql.Tx {
	t.Helper()
	tx, err := enginePool(t, "postgres").BeginTx(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	_, err = tx.Exec(stmt)
	require.NoError(t, err, stmt)
	return tx
}

// TestParallelChangesOfOneCredentialAreSerialised: eight rotations of one credential at once,
// while the engine is slow, answer one 200 and seven 409 (another change is in progress) at
// once, never 502, with one audit event; a later rotation's password logs in; eight deletes at once answer 200, 404 or 409,
// the credential is audited deleted once and its role is gone. Before, concurrent ALTER ROLEs
// made some rotations fail with 502 (the engine's "tuple concurrently updated", never logged).
func TestParallelChangesOfOneCredentialAreSerialised(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	it, _, _ := ownedDatabase(t, a, "postgres")
	cr := createCredential(t, a, admin, it, "")

	// The engine is slow: the test holds the role's catalogue row, so ALTER ROLE waits.
	tx := holdInTx(t, fmt.Sprintf(`ALTER ROLE %q VALID UNTIL 'infinity'`, cr.Username))
	go func() {
		waitForEngineLock(t, "ALTER ROLE")
		time.Sleep(time.Second) // every rotation has arrived
		_ = tx.Rollback()
	}()
	ok := 0
	for _, r := range parallel(8, func() *apptest.Resp { return rotateCredential(t, a, admin, cr.ID) }) {
		require.Contains(t, []int{http.StatusOK, http.StatusConflict}, r.Status, string(r.Raw))
		if r.Status == http.StatusOK {
			ok++
		}
	}
	assert.Equal(t, 1, ok, "the first rotation wins, the others are told another change is in progress")
	assert.Equal(t, ok, audited(t, a, "access_credential.rotated", cr.ID), "one audit event per rotation")
	r := rotateCredential(t, a, admin, cr.ID)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var last credView
	r.Decode(t, &last)
	_, err := connect(t, "postgres", it, cr.Username, last.Password)
	assert.NoError(t, err)

	deleted := 0
	for _, r := range parallel(8, func() *apptest.Resp {
		return a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", cr.ID), Token: admin})
	}) {
		require.Contains(t, []int{http.StatusOK, http.StatusNotFound, http.StatusConflict}, r.Status, string(r.Raw))
		if r.Status == http.StatusOK {
			deleted++
		}
	}
	assert.GreaterOrEqual(t, deleted, 1)
	assert.Equal(t, 1, audited(t, a, "access_credential.deleted", cr.ID))
	assert.False(t, existsOnEngine(t, "postgres", cr.Username))
}

// TestBusyDatabaseAnswers409AtOnce: while a delete waits on the engine (the test holds a lock
// on the tenant database, so DROP DATABASE blocks), a pause, a resume and a credential create
// on that database answer 409 at once instead of waiting for the row lock until their deadline
// (503 before). Once the engine answers, the delete completes.
func TestBusyDatabaseAnswers409AtOnce(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	tx := holdInTx(t, fmt.Sprintf(`COMMENT ON DATABASE %q IS 'held'`, it.DatabaseName))

	done := make(chan *apptest.Resp, 1)
	go func() {
		done <- a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", it.ID), Token: u.Token})
	}()
	waitForEngineLock(t, "DROP DATABASE")

	for _, send := range []func() *apptest.Resp{
		func() *apptest.Resp { return a.Post(fmt.Sprintf("/api/me/databases/%d/pause", it.ID), u.Token, nil) },
		func() *apptest.Resp { return a.Post(fmt.Sprintf("/api/me/databases/%d/resume", it.ID), u.Token, nil) },
		func() *apptest.Resp {
			return a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/database-instances/%d", it.ID), Token: admin,
				Body: map[string]any{"name": "renamed"}})
		},
	} {
		began := time.Now()
		r := send()
		assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
		assert.True(t, strings.Contains(string(r.Raw), "being changed"), string(r.Raw))
		assert.Less(t, time.Since(began), 2*time.Second, "answered at once")
	}
	require.NoError(t, tx.Rollback())
	r := <-done
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
}
