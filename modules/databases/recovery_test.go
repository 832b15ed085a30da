package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// recoveryItem is a database as the API shows it, with its recovery window.
type recoveryItem struct {
	item
	UserID  int64      `json:"userId"`
	PurgeAt *time.Time `json:"purgeAt"`
}

// withWindow starts the service with a 72-hour recovery window.
func withWindow(t *testing.T, extra map[string]any) *apptest.App {
	kv := map[string]any{"Databases:RecoveryHours": 72}
	for k, v := range extra {
		kv[k] = v
	}
	return start(t, kv)
}

func deleteDatabase(t *testing.T, a *apptest.App, path, token string) recoveryItem {
	t.Helper()
	r := a.Do(apptest.Request{Method: http.MethodDelete, Path: path, Token: token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var it recoveryItem
	r.Decode(t, &it)
	return it
}

func restore(t *testing.T, a *apptest.App, path, token string, body any) recoveryItem {
	t.Helper()
	r := a.Post(path, token, body)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var it recoveryItem
	r.Decode(t, &it)
	return it
}

func storedStatus(t *testing.T, a *apptest.App, id int64) string {
	t.Helper()
	var s string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM database_instances WHERE id = ?", id).Scan(&s))
	return s
}

// endWindow moves a deleted database's recovery window into the past, as the clock would.
func endWindow(t *testing.T, a *apptest.App, id int64) {
	t.Helper()
	_, err := a.DB.Exec("UPDATE database_instances SET purge_at = now() - interval '1 second', "+
		"next_attempt_at = now() - interval '1 second' WHERE id = ?", id)
	require.NoError(t, err)
}

// TestDeletedDatabaseIsUnreachableThenRestored: on both engines a DELETE within the recovery
// window ends the open session of the owner, refuses the owner's and a credential's logins and
// keeps the database (listed Deleted with purgeAt, password not revealed); a restore brings it back
// Active with its rows, the same password and the credential.
func TestDeletedDatabaseIsUnreachableThenRestored(t *testing.T) {
	a := withWindow(t, nil)
	admin := a.AdminToken(t)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			ctx := context.Background()
			u := a.Register(t)
			token := u.Token
			it := create(t, a, token, engine)
			rv := revealPassword(t, a, token, it.ID)
			owner, err := connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err)
			for _, stmt := range []string{"CREATE TABLE kept (v int)", "INSERT INTO kept VALUES (42)"} {
				_, err = owner.Exec(stmt)
				require.NoError(t, err, stmt)
			}
			cred := createCredential(t, a, admin, it, "")
			session, err := owner.Conn(ctx)
			require.NoError(t, err)
			defer session.Close()

			before := time.Now()
			del := deleteDatabase(t, a, fmt.Sprintf("/api/me/databases/%d", it.ID), token)
			assert.Equal(t, "Deleted", del.Status)
			require.NotNil(t, del.PurgeAt)
			assert.WithinDuration(t, before.Add(72*time.Hour), *del.PurgeAt, time.Minute)
			assert.Equal(t, "Recoverable", storedStatus(t, a, it.ID))

			_, err = session.ExecContext(ctx, "SELECT 1")
			assert.Error(t, err, "the open session is ended")
			_, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			assert.Error(t, err, "the owner cannot log in")
			_, err = connect(t, engine, it, cred.Username, cred.Password)
			assert.Error(t, err, "the credential cannot log in")
			assert.True(t, existsOnEngine(t, engine, it.DatabaseName), "kept on the engine")

			var mine []recoveryItem
			a.Get("/api/me/databases", token).Decode(t, &mine)
			found := false
			for _, x := range mine {
				if x.ID == it.ID {
					found = true
					assert.Equal(t, "Deleted", x.Status)
					assert.NotNil(t, x.PurgeAt)
				}
			}
			assert.True(t, found, "listed during its window")
			assert.Equal(t, http.StatusConflict, a.Get(fmt.Sprintf("/api/me/databases/%d/password", it.ID), token).Status)
			r := a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", it.ID), Token: token})
			assert.Equal(t, http.StatusConflict, r.Status, "already deleted: %s", r.Raw)
			assert.Equal(t, http.StatusConflict, a.Post(fmt.Sprintf("/api/me/databases/%d/pause", it.ID), token, nil).Status)

			back := restore(t, a, fmt.Sprintf("/api/me/databases/%d/restore", it.ID), token, nil)
			assert.Equal(t, "Active", back.Status)
			assert.Nil(t, back.PurgeAt)
			assert.Equal(t, rv, revealPassword(t, a, token, it.ID), "the same password")
			pool, err := connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err, "the owner logs in again")
			var v int
			require.NoError(t, pool.QueryRow("SELECT v FROM kept").Scan(&v))
			assert.Equal(t, 42, v, "with its data")
			_, err = connect(t, engine, it, cred.Username, cred.Password)
			assert.NoError(t, err, "the credential logs in again")
			assert.Equal(t, 1, audited(t, a, "database.deleted", it.ID))
			assert.Equal(t, 1, audited(t, a, "database.restored", it.ID))
			r = a.Post(fmt.Sprintf("/api/me/databases/%d/restore", it.ID), token, nil)
			assert.Equal(t, http.StatusConflict, r.Status, "an Active database is not restored: %s", r.Raw)
		})
	}
}

// TestRecoveryWindowEndsInADrop: once the window is over the finisher drops the database on its
// engine (once: database.purged is recorded once, a second run finds nothing), and a restore is
// 404, as it already is when the window is over but the finisher has not dropped it yet.
func TestRecoveryWindowEndsInADrop(t *testing.T) {
	a := withWindow(t, nil)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it := create(t, a, u.Token, engine)
			deleteDatabase(t, a, fmt.Sprintf("/api/me/databases/%d", it.ID), u.Token)
			endWindow(t, a, it.ID)
			_, err := a.DB.Exec("UPDATE database_instances SET next_attempt_at = now() + interval '1 hour' WHERE id = ?", it.ID)
			require.NoError(t, err)
			path := fmt.Sprintf("/api/me/databases/%d/restore", it.ID)
			r := a.Post(path, u.Token, nil)
			assert.Equal(t, http.StatusNotFound, r.Status, "window over, not dropped yet: %s", r.Raw)

			endWindow(t, a, it.ID)
			a.Finisher.RunOnce(context.Background())
			assert.Equal(t, "Deleted", storedStatus(t, a, it.ID))
			assert.False(t, existsOnEngine(t, engine, it.DatabaseName), "dropped on the engine")
			a.Finisher.RunOnce(context.Background())
			assert.Equal(t, 1, audited(t, a, "database.purged", it.ID))
			r = a.Post(path, u.Token, nil)
			assert.Equal(t, http.StatusNotFound, r.Status, "purged: %s", r.Raw)
			var mine []recoveryItem
			a.Get("/api/me/databases", u.Token).Decode(t, &mine)
			for _, x := range mine {
				assert.NotEqual(t, it.ID, x.ID, "no longer listed")
			}
		})
	}
}

// TestDeletedDatabaseFreesQuotaKeepsName: during its window a deleted database does not count
// against Databases:MaxPerUser, but its name stays taken (no credential may take it); restoring it
// counts again, so a restore at the quota is 409.
func TestDeletedDatabaseFreesQuotaKeepsName(t *testing.T) {
	a := withWindow(t, map[string]any{"Databases:MaxPerUser": 2})
	admin := a.AdminToken(t)
	u := a.Register(t) // registration's database counts
	first := create(t, a, u.Token, "postgres")
	assert.Equal(t, http.StatusConflict, a.Post("/api/me/databases", u.Token, map[string]any{"engine": "postgres"}).Status)
	deleteDatabase(t, a, fmt.Sprintf("/api/me/databases/%d", first.ID), u.Token)
	second := create(t, a, u.Token, "postgres")

	other := create(t, a, a.Register(t).Token, "postgres")
	r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": other.ID, "username": first.DatabaseName})
	assert.Equal(t, http.StatusConflict, r.Status, "the deleted database's name is taken: %s", r.Raw)

	r = a.Post(fmt.Sprintf("/api/me/databases/%d/restore", first.ID), u.Token, nil)
	assert.Equal(t, http.StatusConflict, r.Status, "at the quota: %s", r.Raw)
	assert.Contains(t, string(r.Raw), "Quota")
	deleteDatabase(t, a, fmt.Sprintf("/api/me/databases/%d", second.ID), u.Token)
	assert.Equal(t, "Active", restore(t, a, fmt.Sprintf("/api/me/databases/%d/restore", first.ID), u.Token, nil).Status)
}

// TestAdminListsPurgesAndRestoresDeletedDatabases: admins find deleted databases in their window
// (recoverable=true; status=Deleted; the default list), purge one at once (dropped,
// audited), and restore a deleted user's database to another user, with its password.
func TestAdminListsPurgesAndRestoresDeletedDatabases(t *testing.T) {
	a := withWindow(t, nil)
	admin := a.AdminToken(t)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	deleteDatabase(t, a, fmt.Sprintf("/api/me/databases/%d", it.ID), u.Token)
	ids := func(query string) []int64 {
		var p struct {
			Items []recoveryItem `json:"items"`
		}
		r := a.Get("/api/database-instances?pageSize=100&userId="+fmt.Sprint(u.ID)+query, admin)
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		r.Decode(t, &p)
		out := []int64{}
		for _, x := range p.Items {
			out = append(out, x.ID)
		}
		return out
	}
	assert.Contains(t, ids("&recoverable=true"), it.ID)
	assert.Contains(t, ids("&status=Deleted"), it.ID)
	assert.Contains(t, ids(""), it.ID, "still on its engine")

	purged := deleteDatabase(t, a, fmt.Sprintf("/api/database-instances/%d?purge=true", it.ID), admin)
	assert.Equal(t, "Deleted", purged.Status)
	assert.Nil(t, purged.PurgeAt)
	assert.False(t, existsOnEngine(t, "postgres", it.DatabaseName), "dropped at once")
	assert.Equal(t, 1, audited(t, a, "database.purged", it.ID))
	assert.NotContains(t, ids("&recoverable=true"), it.ID)

	// One whose delete failed on the engine (Deleting, its window set) is purged as well.
	failing := create(t, a, u.Token, "postgres")
	_, err := a.DB.Exec("UPDATE database_instances SET status = 'Deleting', attempts = 1, purge_at = now() + interval '72 hours', "+
		"next_attempt_at = now() + interval '1 hour' WHERE id = ?", failing.ID)
	require.NoError(t, err)
	assert.Equal(t, "Deleted", deleteDatabase(t, a, fmt.Sprintf("/api/database-instances/%d?purge=true", failing.ID), admin).Status)
	assert.Equal(t, "Deleted", storedStatus(t, a, failing.ID))
	assert.False(t, existsOnEngine(t, "postgres", failing.DatabaseName), "dropped, not kept for the window")
	assert.Equal(t, 1, audited(t, a, "database.purged", failing.ID))

	// A deleted user's databases keep the window; the admin gives one to another user.
	gone := a.Register(t)
	kept := create(t, a, gone.Token, "postgres")
	rv := revealPassword(t, a, gone.Token, kept.ID)
	r := a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/users/%d", gone.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Finisher.RunOnce(context.Background())
	assert.Equal(t, "Recoverable", storedStatus(t, a, kept.ID))
	assert.True(t, existsOnEngine(t, "postgres", kept.DatabaseName))
	_, err = connect(t, "postgres", kept, rv.DatabaseUser, rv.Password)
	assert.Error(t, err, "a deleted user's database is unreachable")
	path := fmt.Sprintf("/api/database-instances/%d/restore", kept.ID)
	r = a.Post(path, admin, nil)
	assert.Equal(t, http.StatusConflict, r.Status, "the owner is deleted: %s", r.Raw)
	heir := a.Register(t)
	back := restore(t, a, path, admin, map[string]any{"userId": heir.ID})
	assert.Equal(t, "Active", back.Status)
	assert.Equal(t, heir.ID, back.UserID)
	assert.Equal(t, rv, revealPassword(t, a, heir.Token, kept.ID), "the same password, for its new owner")
}

// TestRecoveryCrashesAreFinished: a delete whose request died after storing its intent (Deleting
// with a window) and a restore that died after storing its own (Restoring) are finished by the
// finisher: the first ends Recoverable with its logins refused, the second Active with them
// allowed.
func TestRecoveryCrashesAreFinished(t *testing.T) {
	a := withWindow(t, nil)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	rv := revealPassword(t, a, u.Token, it.ID)
	_, err := a.DB.Exec("UPDATE database_instances SET status = 'Deleting', purge_at = now() + interval '72 hours', "+
		"next_attempt_at = now() WHERE id = ?", it.ID)
	require.NoError(t, err)
	a.Finisher.RunOnce(context.Background())
	assert.Equal(t, "Recoverable", storedStatus(t, a, it.ID))
	_, err = connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	assert.Error(t, err, "the logins are refused")
	a.Finisher.RunOnce(context.Background())
	assert.True(t, existsOnEngine(t, "postgres", it.DatabaseName), "not dropped before its window ends")

	_, err = a.DB.Exec("UPDATE database_instances SET status = 'Restoring', purge_at = NULL, next_attempt_at = now() WHERE id = ?", it.ID)
	require.NoError(t, err)
	a.Finisher.RunOnce(context.Background())
	assert.Equal(t, "Active", storedStatus(t, a, it.ID))
	_, err = connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	assert.NoError(t, err, "the logins are allowed again")
}

// TestRestoreTheEngineFailedIsFinished: a restore whose engine does not answer is a 502 with the
// database as stored (Restoring) and a Retry-After; the finisher brings it back Active once the
// engine answers, its owner's login allowed again.
func TestRestoreTheEngineFailedIsFinished(t *testing.T) {
	a := withWindow(t, nil)
	down := apptest.Start(t, apptest.With(map[string]any{
		"ConnectionStrings:TenantPostgres": "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		"ConnectionStrings:TenantMysql":    "root@tcp(127.0.0.1:1)/?timeout=2s",
		"Databases:RecoveryHours":          72,
	}))
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it := create(t, a, u.Token, engine)
			rv := revealPassword(t, a, u.Token, it.ID)
			deleteDatabase(t, a, fmt.Sprintf("/api/me/databases/%d", it.ID), u.Token)

			r := down.Post(fmt.Sprintf("/api/me/databases/%d/restore", it.ID), u.Token, nil)
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			assertTriedAgainIn(t, r, "restore")
			var stored recoveryItem
			r.Decode(t, &stored)
			assert.Equal(t, "Restoring", stored.Status)

			_, err := a.DB.Exec("UPDATE database_instances SET next_attempt_at = now() WHERE id = ?", it.ID)
			require.NoError(t, err)
			a.Finisher.RunOnce(context.Background())
			assert.Equal(t, "Active", storedStatus(t, a, it.ID))
			_, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			assert.NoError(t, err, "the owner logs in again once the restore is finished")
		})
	}
}

// TestRestoreTakesAnIdempotencyKey: a restore retried with its key is answered again, replayed,
// and restores once.
func TestRestoreTakesAnIdempotencyKey(t *testing.T) {
	a := withWindow(t, nil)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	deleteDatabase(t, a, fmt.Sprintf("/api/me/databases/%d", it.ID), u.Token)
	send := func() *apptest.Resp {
		return a.Do(apptest.Request{Method: http.MethodPost, Path: fmt.Sprintf("/api/me/databases/%d/restore", it.ID), Token: u.Token,
			Header: map[string]string{"Idempotency-Key": "restore-" + fmt.Sprint(it.ID)}})
	}
	first, again := send(), send()
	require.Equal(t, http.StatusOK, first.Status, string(first.Raw))
	assert.Equal(t, http.StatusOK, again.Status, string(again.Raw))
	assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, 1, audited(t, a, "database.restored", it.ID))
}

// TestTakeoverRotatesADeletedDatabase: a password reset that takes the account over gives a
// database in its recovery window a new owner password too, so restoring it brings back the new
// password, not the one the old holder revealed.
func TestTakeoverRotatesADeletedDatabase(t *testing.T) {
	a, smtp := mailedWithWindow(t)
	eve := a.Register(t)
	it := create(t, a, eve.Token, "postgres")
	old := revealPassword(t, a, eve.Token, it.ID)
	deleteDatabase(t, a, fmt.Sprintf("/api/me/databases/%d", it.ID), eve.Token)

	resetThroughMail(t, a, smtp, eve, ownerPassword)
	assert.Contains(t, rotatedInAudit(t, a, eve.ID), it.ID)
	owner := signIn(t, a, eve.Email, ownerPassword)
	assert.Equal(t, "Active", restore(t, a, fmt.Sprintf("/api/me/databases/%d/restore", it.ID), owner, nil).Status)
	_, err := connect(t, "postgres", it, old.DatabaseUser, old.Password)
	assert.Error(t, err, "the old holder's password does not log in")
	now := revealPassword(t, a, owner, it.ID)
	assert.NotEqual(t, old.Password, now.Password)
	_, err = connect(t, "postgres", it, now.DatabaseUser, now.Password)
	assert.NoError(t, err, "the new password does")
}
