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
	"provisioner/platform/testutil"
)

// rotatedThenDeleted makes a database on engine, rotates its password with an hour's grace and
// deletes it within the recovery window: both logins are refused and the new login's open
// session is ended. It returns the database, the old and the rotated credentials.
func rotatedThenDeleted(t *testing.T, a *apptest.App, token, engine string) (item, reveal, rotated) {
	t.Helper()
	ctx := context.Background()
	it := create(t, a, token, engine)
	old := revealPassword(t, a, token, it.ID)
	rot := rotate(t, a, token, it.ID, 3600)
	pool, err := connect(t, engine, it, rot.DatabaseUser, rot.Password)
	require.NoError(t, err)
	session, err := pool.Conn(ctx)
	require.NoError(t, err)
	defer session.Close()
	_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
	require.NoError(t, err, "the old password works during the grace")

	deleteDatabase(t, a, fmt.Sprintf("/api/me/databases/%d", it.ID), token)
	require.Equal(t, "Recoverable", storedStatus(t, a, it.ID))
	_, err = session.ExecContext(ctx, "SELECT 1")
	assert.Error(t, err, "the new login's session is ended")
	_, err = connect(t, engine, it, rot.DatabaseUser, rot.Password)
	assert.Error(t, err, "deleted: the new login is refused")
	_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
	assert.Error(t, err, "deleted: the old login is refused")
	return it, old, rot
}

// TestRotatedThenDeletedThenRestoredWithinTheGrace: a database deleted during a rotation's grace
// refuses both logins; restored while the grace lasts, both log in again, and the old one is
// refused once the grace ends.
func TestRotatedThenDeletedThenRestoredWithinTheGrace(t *testing.T) {
	a := withWindow(t, nil)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it, old, rot := rotatedThenDeleted(t, a, u.Token, engine)
			restore(t, a, fmt.Sprintf("/api/me/databases/%d/restore", it.ID), u.Token, nil)
			_, err := connect(t, engine, it, rot.DatabaseUser, rot.Password)
			assert.NoError(t, err, "restored: the new password works")
			_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
			assert.NoError(t, err, "restored within the grace: the old one still does")
			endGrace(t, a, it.ID)
			_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
			assert.Error(t, err, "refused after the grace")
			assert.Equal(t, 1, countAudit(t, a, "database.password.retired", it.ID))
		})
	}
}

// TestRotatedThenDeletedThenRestoredAfterTheGrace: a grace that ends while the database is in its
// recovery window retires the old login all the same (once, audited), so a restore brings back
// the new password only; a grace that ended before the finisher got to it is retired by the
// restore itself.
func TestRotatedThenDeletedThenRestoredAfterTheGrace(t *testing.T) {
	a := withWindow(t, nil)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it, old, rot := rotatedThenDeleted(t, a, u.Token, engine)
			endGrace(t, a, it.ID)
			assert.Equal(t, 1, countAudit(t, a, "database.password.retired", it.ID), "retired within the recovery window")
			var open int
			require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM database_password_rotations WHERE database_instance_id = ? "+
				"AND status IN ('Pending', 'Retiring')", it.ID).Scan(&open))
			assert.Zero(t, open)
			restore(t, a, fmt.Sprintf("/api/me/databases/%d/restore", it.ID), u.Token, nil)
			_, err := connect(t, engine, it, rot.DatabaseUser, rot.Password)
			assert.NoError(t, err, "restored: the new password works")
			_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
			assert.Error(t, err, "restored: the retired password does not")

			// The grace ended, the finisher has not retired it yet: the restore does.
			it2, old2, rot2 := rotatedThenDeleted(t, a, u.Token, engine)
			_, err = a.DB.Exec("UPDATE database_password_rotations SET retire_at = now() - interval '1 second', "+
				"next_attempt_at = now() + interval '1 hour' WHERE database_instance_id = ? AND status = 'Retiring'", it2.ID)
			require.NoError(t, err)
			restore(t, a, fmt.Sprintf("/api/me/databases/%d/restore", it2.ID), u.Token, nil)
			_, err = connect(t, engine, it2, rot2.DatabaseUser, rot2.Password)
			assert.NoError(t, err)
			_, err = connect(t, engine, it2, old2.DatabaseUser, old2.Password)
			assert.Error(t, err, "the grace is over: refused on restore")
		})
	}
}

// TestRotatedDatabasePurgeDropsBothLogins: the end of the recovery window and an administrator's
// purge both drop the second login with the database.
func TestRotatedDatabasePurgeDropsBothLogins(t *testing.T) {
	a := withWindow(t, nil)
	admin := a.AdminToken(t)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			ended, _, _ := rotatedThenDeleted(t, a, u.Token, engine)
			endWindow(t, a, ended.ID)
			a.Finisher.RunOnce(context.Background())
			assert.Equal(t, "Deleted", storedStatus(t, a, ended.ID))
			assert.False(t, existsOnEngine(t, engine, ended.DatabaseName))
			assert.False(t, existsOnEngine(t, engine, ended.DatabaseUser+"_login"), "window over: the second login is dropped")

			purged, _, _ := rotatedThenDeleted(t, a, u.Token, engine)
			deleteDatabase(t, a, fmt.Sprintf("/api/database-instances/%d?purge=true", purged.ID), admin)
			assert.False(t, existsOnEngine(t, engine, purged.DatabaseName))
			assert.False(t, existsOnEngine(t, engine, purged.DatabaseUser+"_login"), "purged: the second login is dropped")
		})
	}
}

// TestDeletedDatabaseIsNotRotated: rotating the password of a database in its recovery window is
// 409, and its due scheduled rotation waits until it is restored.
func TestDeletedDatabaseIsNotRotated(t *testing.T) {
	a := withWindow(t, nil)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	deleteDatabase(t, a, fmt.Sprintf("/api/me/databases/%d", it.ID), u.Token)
	r := a.Post(fmt.Sprintf("/api/me/databases/%d/rotate-password", it.ID), u.Token, map[string]any{"gracePeriodSeconds": 0})
	assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	assert.NotContains(t, string(r.Raw), "Recoverable", "shown as Deleted")

	var sealed []byte
	require.NoError(t, a.DB.QueryRow("SELECT password_sealed FROM database_instances WHERE id = ?", it.ID).Scan(&sealed))
	_, err := a.DB.Exec("UPDATE database_instances SET rotation_days = 1 WHERE id = ?", it.ID)
	require.NoError(t, err)
	_, err = a.DB.Exec("INSERT INTO database_password_rotations (database_instance_id, status, reason, next_attempt_at) "+
		"VALUES (?, 'Scheduled', 'scheduled', now())", it.ID)
	require.NoError(t, err)
	a.Finisher.RunOnce(context.Background())
	var status string
	var next time.Time
	require.NoError(t, a.DB.QueryRow("SELECT status, next_attempt_at FROM database_password_rotations WHERE database_instance_id = ?",
		it.ID).Scan(&status, &next))
	assert.Equal(t, "Scheduled", status, "put off")
	assert.True(t, next.After(time.Now()))
	var now []byte
	require.NoError(t, a.DB.QueryRow("SELECT password_sealed FROM database_instances WHERE id = ?", it.ID).Scan(&now))
	assert.Equal(t, sealed, now, "not rotated")
	assert.Equal(t, 0, countAudit(t, a, "database.password.rotated", it.ID))
}

// mailedWithWindow starts the service with a 72-hour recovery window and mail, for takeovers.
func mailedWithWindow(t *testing.T) (*apptest.App, *testutil.SMTPServer) {
	t.Helper()
	smtp := testutil.StartSMTP(t)
	kv := mailed(smtp)
	kv["Databases:RecoveryHours"] = 72
	return start(t, kv), smtp
}

// ownerPassword is the password the mailbox's owner chooses when a reset takes the account over.
const ownerPassword = "the-mailbox-owners-passphrase-8"

// TestTakeoverRotatesADatabaseBeingDeleted: a takeover while a delete with a recovery window is
// still being driven (Deleting) rotates that database too, keeping its logins refused through the
// window; a restore brings back the new password only.
func TestTakeoverRotatesADatabaseBeingDeleted(t *testing.T) {
	a, smtp := mailedWithWindow(t)
	eve := a.Register(t)
	engines := []string{"postgres", "mysql"}
	its := map[string]item{}
	olds := map[string]reveal{}
	for _, engine := range engines {
		it := create(t, a, eve.Token, engine)
		its[engine], olds[engine] = it, revealPassword(t, a, eve.Token, it.ID)
		_, err := a.DB.Exec("UPDATE database_instances SET status = 'Deleting', purge_at = now() + interval '72 hours', "+
			"next_attempt_at = now() + interval '1 hour' WHERE id = ?", it.ID)
		require.NoError(t, err)
	}
	resetThroughMail(t, a, smtp, eve, ownerPassword)
	rotatedIDs := rotatedInAudit(t, a, eve.ID)
	owner := signIn(t, a, eve.Email, ownerPassword)
	for _, engine := range engines {
		it, old := its[engine], olds[engine]
		assert.Contains(t, rotatedIDs, it.ID)
		_, err := a.DB.Exec("UPDATE database_instances SET next_attempt_at = now() WHERE id = ?", it.ID)
		require.NoError(t, err)
		a.Settle(20 * time.Second)
		require.Equal(t, "Recoverable", storedStatus(t, a, it.ID), engine)
		_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
		assert.Error(t, err, "%s: deleted and taken over: the old password is refused", engine)
		if engine == "postgres" {
			var canLogin bool
			require.NoError(t, enginePool(t, "postgres").QueryRow("SELECT rolcanlogin FROM pg_roles WHERE rolname = $1",
				it.DatabaseUser+"_login").Scan(&canLogin))
			assert.False(t, canLogin, "the new login stays refused while deleted")
		}
		restore(t, a, fmt.Sprintf("/api/me/databases/%d/restore", it.ID), owner, nil)
		now := revealPassword(t, a, owner, it.ID)
		_, err = connect(t, engine, it, now.DatabaseUser, now.Password)
		assert.NoError(t, err, "%s: the new password logs in", engine)
		_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
		assert.Error(t, err, "%s: the old holder's does not", engine)
	}
}
