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

	"provisioner/app/apptest"
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
	waitForLock(t, enginePool(t, "postgres"), "$1", prefix)
}

// waitForLock waits until a statement starting with prefix waits for a lock on the server of
// pool (param is the driver's placeholder).
func waitForLock(t *testing.T, pool interface {
	QueryRow(query string, args ...any) *sql.Row
}, param, prefix string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting bool
		_ = pool.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE `+param+`)`, prefix+"%").Scan(&waiting)
		return waiting
	}, 10*time.Second, 50*time.Millisecond, "%s waits for a lock", prefix)
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
// the credential is audited deleted once and its role is gone.
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
	assert.Equal(t, 1, deleted, "one DELETE deletes, the others are 409 or 404")
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

// TestCredentialCreateRacingDatabaseDelete: a credential create and a delete of its database at
// the same time never leave a role on the engine without a live credential, a live credential of
// a deleted database, or a 500.
//   - The delete finishes after the create has checked the database (Active) and before it stores
//     its row: the create answers 404 and makes nothing (the test holds the create's insert: its
//     own uncommitted row of the same username blocks it on the unique index). Without the
//     create's second look at the database, under its row lock, the role was made on the engine
//     after the drop (and its grant then failed on the missing database, 502), and the undo
//     skipped the engine because the database was Deleted: the role stayed.
//   - The delete arrives while the engine makes the role (the test holds an uncommitted role of
//     the same name, so CREATE ROLE waits): the delete answers 409 "being changed" at once, the
//     create completes, and a delete afterwards drops the credential's role with the database.
func TestCredentialCreateRacingDatabaseDelete(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	deleteDatabase := func(token string, it item) *apptest.Resp {
		return a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", it.ID), Token: token})
	}
	liveCredentials := func(it item) int {
		var n int
		require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM access_credentials WHERE database_instance_id = ? AND status <> 'Deleted'", it.ID).Scan(&n))
		return n
	}

	t.Run("delete between the check and the insert", func(t *testing.T) {
		u := a.Register(t)
		it := create(t, a, u.Token, "postgres")
		other := create(t, a, u.Token, "postgres")
		username := it.DatabaseName + "_race"
		hold, err := a.DB.BeginTx(context.Background(), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = hold.Rollback() })
		_, err = hold.Exec(`INSERT INTO access_credentials (database_instance_id, username, password_sealed, status) VALUES (?, ?, 'held', 'Creating')`,
			other.ID, username)
		require.NoError(t, err)

		done := make(chan *apptest.Resp, 1)
		go func() {
			done <- a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "username": username})
		}()
		waitForLock(t, a.DB, "?", `INSERT INTO "access_credentials"`)
		r := deleteDatabase(u.Token, it)
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		require.False(t, existsOnEngine(t, "postgres", it.DatabaseName), "the database is dropped")
		require.NoError(t, hold.Rollback())

		r = <-done
		assert.Equal(t, http.StatusNotFound, r.Status, string(r.Raw))
		assert.Contains(t, string(r.Raw), `"success":false`)
		assert.False(t, existsOnEngine(t, "postgres", username), "no role is left on the engine")
		assert.Zero(t, liveCredentials(it), "no live credential of the deleted database")
		assert.Empty(t, listCredentials(t, a, admin, it))
	})

	t.Run("delete while the engine makes the role", func(t *testing.T) {
		u := a.Register(t)
		it := create(t, a, u.Token, "postgres")
		username := it.DatabaseName + "_race"
		tx := holdInTx(t, fmt.Sprintf(`CREATE ROLE %q`, username))

		done := make(chan *apptest.Resp, 1)
		go func() {
			done <- a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "username": username})
		}()
		waitForEngineLock(t, "CREATE ROLE")
		r := deleteDatabase(u.Token, it)
		assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
		assert.Contains(t, string(r.Raw), "being changed")
		require.NoError(t, tx.Rollback())

		r = <-done
		require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
		var cr credView
		r.Decode(t, &cr)
		_, err := connect(t, "postgres", it, username, cr.Password)
		require.NoError(t, err, "the credential logs in")

		r = deleteDatabase(u.Token, it)
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		assert.False(t, existsOnEngine(t, "postgres", username), "the credential's role went with the database")
		assert.False(t, existsOnEngine(t, "postgres", it.DatabaseName))
		assert.Zero(t, liveCredentials(it))
	})
}
