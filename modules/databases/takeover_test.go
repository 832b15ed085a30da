package databases_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
	"provisioner/platform/testutil"
)

const frontend = "http://frontend.test"

// mailed configures an app to mail through smtp, with reset links to frontend.
func mailed(smtp *testutil.SMTPServer) map[string]any {
	return map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port, "Frontend:BaseUrl": frontend}
}

// resetThroughMail asks a reset link for u through app a, follows it with newPassword and returns
// the answer (200 asserted).
func resetThroughMail(t *testing.T, a *apptest.App, smtp *testutil.SMTPServer, u apptest.User, newPassword string) *apptest.Resp {
	t.Helper()
	before := smtp.CountTo(u.Email)
	require.Equal(t, http.StatusOK, a.Post("/api/auth/forgot-password", "", map[string]any{"email": u.Email}).Status)
	msgs := smtp.WaitForN(t, u.Email, before+1, 10*time.Second)
	_, after, found := strings.Cut(msgs[len(msgs)-1], frontend+"/auth/reset-password#token=")
	require.True(t, found, msgs[len(msgs)-1])
	r := a.Post("/api/auth/reset-password", "", map[string]any{"token": strings.Fields(after)[0], "newPassword": newPassword})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	return r
}

// signIn returns an access token of email with password.
func signIn(t *testing.T, a *apptest.App, email, password string) string {
	t.Helper()
	r := a.Post("/api/auth/login", "", map[string]any{"email": email, "password": password})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var d struct {
		AccessToken string `json:"accessToken"`
	}
	r.Decode(t, &d)
	return d.AccessToken
}

// rotatedInAudit is what the last user.password.reset event of user lists as databasePasswordsRotated.
func rotatedInAudit(t *testing.T, a *apptest.App, userID int64) []int64 {
	t.Helper()
	var raw []byte
	require.NoError(t, a.DB.QueryRow(`SELECT details FROM audit_events WHERE action = 'user.password.reset' AND user_id = ?
		ORDER BY id DESC LIMIT 1`, userID).Scan(&raw))
	var d struct {
		Revoked struct {
			Databases []int64 `json:"databasePasswordsRotated"`
		} `json:"revoked"`
	}
	require.NoError(t, json.Unmarshal(raw, &d), string(raw))
	return d.Revoked.Databases
}

// TestTakeoverResetRotatesDatabasePasswords: Eve registers the owner's address, makes databases
// and reveals their passwords, keeps a session open and pauses one. The owner takes the account
// over by a reset through the mailed link: by the time the reset is answered, Eve's passwords no
// longer log in on either engine, her open session is ended, the revealed passwords are new and
// work, and the paused database stays paused until it is resumed (then the new password works, the
// old one still not). A later reset of the now proven account is no takeover: nothing is rotated.
func TestTakeoverResetRotatesDatabasePasswords(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a := start(t, mailed(smtp))
	ctx := context.Background()
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			eve := a.Register(t)
			active := create(t, a, eve.Token, engine)
			paused := create(t, a, eve.Token, engine)
			oldActive := revealPassword(t, a, eve.Token, active.ID)
			oldPaused := revealPassword(t, a, eve.Token, paused.ID)
			pool, err := connect(t, engine, active, oldActive.DatabaseUser, oldActive.Password)
			require.NoError(t, err)
			session, err := pool.Conn(ctx)
			require.NoError(t, err)
			defer session.Close()
			setPaused(t, a, eve.Token, paused.ID, true)

			r := resetThroughMail(t, a, smtp, eve, ownerPassword)
			assert.Contains(t, r.Env.Message, "passwords of the account's databases were changed", "the owner is told")

			_, err = session.ExecContext(ctx, "SELECT 1")
			assert.Error(t, err, "Eve's open session is ended")
			_, err = connect(t, engine, active, oldActive.DatabaseUser, oldActive.Password)
			assert.Error(t, err, "Eve's revealed password no longer logs in")

			owner := signIn(t, a, eve.Email, ownerPassword)
			newActive := revealPassword(t, a, owner, active.ID)
			assert.NotEqual(t, oldActive.Password, newActive.Password)
			_, err = connect(t, engine, active, newActive.DatabaseUser, newActive.Password)
			assert.NoError(t, err, "the new password logs in")

			newPaused := revealPassword(t, a, owner, paused.ID)
			assert.NotEqual(t, oldPaused.Password, newPaused.Password)
			_, err = connect(t, engine, paused, newPaused.DatabaseUser, newPaused.Password)
			assert.Error(t, err, "a paused database stays paused")
			setPaused(t, a, owner, paused.ID, false)
			_, err = connect(t, engine, paused, newPaused.DatabaseUser, newPaused.Password)
			assert.NoError(t, err, "after resume the new password logs in")
			_, err = connect(t, engine, paused, oldPaused.DatabaseUser, oldPaused.Password)
			assert.Error(t, err, "after resume the old password still does not")

			rotated := rotatedInAudit(t, a, eve.ID)
			assert.Contains(t, rotated, active.ID)
			assert.Contains(t, rotated, paused.ID)
			var audited int
			require.NoError(t, a.DB.QueryRow(`SELECT count(*) FROM audit_events WHERE action = 'database.password.rotated'
				AND target_id = ?`, fmt.Sprint(active.ID)).Scan(&audited))
			assert.Equal(t, 1, audited)

			// The account's email is proven now: a second reset takes nothing over.
			r = resetThroughMail(t, a, smtp, eve, "the-owners-second-passphrase-9")
			assert.Equal(t, "Password changed; sign in with the new password", r.Env.Message)
			owner = signIn(t, a, eve.Email, "the-owners-second-passphrase-9")
			assert.Equal(t, newActive.Password, revealPassword(t, a, owner, active.ID).Password, "no rotation without a takeover")
			_, err = connect(t, engine, active, newActive.DatabaseUser, newActive.Password)
			assert.NoError(t, err, "the owner's password keeps working")
			var rotations int
			require.NoError(t, a.DB.QueryRow(`SELECT count(*) FROM database_password_rotations WHERE database_instance_id = ?`,
				active.ID).Scan(&rotations))
			assert.Equal(t, 1, rotations, "only the takeover rotated")
		})
	}
}

// TestRotationLeftByAnUnreachableEngineIsFinished: the reset is answered by a replica whose
// engines do not answer (as when the process dies between storing the new passwords and asking
// the engine): the rotations stay Pending with their error, the revealed password is refused with
// 409 and Retry-After rather than handing out one that does not log in yet. When the engines
// answer again (a replica that reaches them), the finisher sets the new passwords: the old ones
// stop working and the new ones log in. A rotation of a database deleted meanwhile, or of one
// whose role is not made yet, ends Done.
func TestRotationLeftByAnUnreachableEngineIsFinished(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	var engines *databases.Engines
	up := start(t, map[string]any{"Databases:MaxPerUser": 6}, apptest.WithFx(fx.Populate(&engines)))
	downCfg := mailed(smtp)
	downCfg["ConnectionStrings:TenantPostgres"] = "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2"
	downCfg["ConnectionStrings:TenantMysql"] = "root@tcp(127.0.0.1:1)/"
	down := apptest.Start(t, apptest.With(downCfg))

	eve := up.Register(t)
	dbs := map[string]item{}
	old := map[string]reveal{}
	for _, engine := range []string{"postgres", "mysql"} {
		dbs[engine] = create(t, up, eve.Token, engine)
		old[engine] = revealPassword(t, up, eve.Token, dbs[engine].ID)
	}

	const ownerPassword = "the-patient-owners-passphrase-5"
	resetThroughMail(t, down, smtp, eve, ownerPassword)
	owner := signIn(t, up, eve.Email, ownerPassword)
	for engine, it := range dbs {
		var status, lastError string
		require.NoError(t, up.DB.QueryRow(`SELECT status, last_error FROM database_password_rotations WHERE database_instance_id = ?`,
			it.ID).Scan(&status, &lastError))
		assert.Equal(t, "Pending", status, engine)
		assert.NotEmpty(t, lastError, engine)
		assert.NotContains(t, lastError, old[engine].Password)

		r := up.Get(fmt.Sprintf("/api/me/databases/%d/password", it.ID), owner)
		assert.Equal(t, http.StatusConflict, r.Status, "%s: %s", engine, r.Raw)
		wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
		assert.NoError(t, err, "Retry-After %q", r.Header.Get("Retry-After"))
		assert.Positive(t, wait)
		assert.NotContains(t, string(r.Raw), old[engine].Password)
	}

	// Meanwhile one database is deleted (its rotation has nothing left to do), and one is back to
	// Provisioning without its role, as after a crash before its create reached the engine: its
	// create gives the role the stored (new) password.
	gone := create(t, up, owner, "postgres")
	fresh := create(t, up, owner, "mysql")
	var rotations int
	require.NoError(t, up.DB.QueryRow(`SELECT count(*) FROM database_password_rotations WHERE database_instance_id IN (?, ?)`,
		gone.ID, fresh.ID).Scan(&rotations))
	require.Zero(t, rotations, "databases made after the takeover are not rotated")
	_, err := up.DB.Exec(`INSERT INTO database_password_rotations (database_instance_id, reason) VALUES (?, 'test'), (?, 'test')`,
		gone.ID, fresh.ID)
	require.NoError(t, err)
	r := up.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", gone.ID), Token: owner})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	require.NoError(t, engines.Get("mysql").Drop(context.Background(), fresh.DatabaseName, fresh.DatabaseUser))
	_, err = up.DB.Exec("UPDATE database_instances SET status = 'Provisioning' WHERE id = ?", fresh.ID)
	require.NoError(t, err)

	_, err = up.DB.Exec("UPDATE database_password_rotations SET next_attempt_at = now() WHERE status = 'Pending'")
	require.NoError(t, err)
	_, err = up.DB.Exec("UPDATE database_instances SET next_attempt_at = now() WHERE id = ?", fresh.ID)
	require.NoError(t, err)
	up.Settle(20 * time.Second)
	var pending int
	require.NoError(t, up.DB.QueryRow(`SELECT count(*) FROM database_password_rotations WHERE database_instance_id IN (?, ?)
		AND status <> 'Done'`, gone.ID, fresh.ID).Scan(&pending))
	assert.Zero(t, pending, "a deleted database's rotation and one of a role not made yet are Done")
	dbs["mysql (recreated)"] = fresh
	for engine, it := range dbs {
		var status string
		require.NoError(t, up.DB.QueryRow(`SELECT status FROM database_password_rotations WHERE database_instance_id = ?`,
			it.ID).Scan(&status))
		assert.Equal(t, "Done", status, engine)
		if o, ok := old[engine]; ok {
			_, err := connect(t, it.Engine, it, o.DatabaseUser, o.Password)
			assert.Error(t, err, "%s: the old password no longer logs in", engine)
		}
		rv := revealPassword(t, up, owner, it.ID)
		_, err := connect(t, it.Engine, it, rv.DatabaseUser, rv.Password)
		assert.NoError(t, err, "%s: the new password logs in", engine)
	}
}

// TestTakeoverRevokesWhatTheOldHolderGrantedOthers: Eve, holding an account whose address is not
// hers, grants CONNECT on its PostgreSQL database to PUBLIC and to the login role of another
// tenant she controls (a second account of hers), and that role every privilege on a table, and
// keeps a session open there as that role. The owner takes the account over by a reset: by the
// time it is answered Eve's session is ended and her other role no longer connects, as pausing
// does; the new owner password logs in, and the database's own access credentials (full access
// and read-only, made by an admin) keep connecting and reading, their open sessions untouched.
// On MySQL/MariaDB a tenant cannot grant anything to another user (no GRANT
// OPTION), so there is nothing to take back there.
func TestTakeoverRevokesWhatTheOldHolderGrantedOthers(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a := start(t, mailed(smtp))
	admin := a.AdminToken(t)
	ctx := context.Background()

	t.Run("postgres", func(t *testing.T) {
		eve := a.Register(t)
		it := create(t, a, eve.Token, "postgres")
		rv := revealPassword(t, a, eve.Token, it.ID)
		full := createCredential(t, a, admin, it, "")
		readOnly := createCredentialRO(t, a, admin, it)
		otherIt, otherRv, _ := ownedDatabase(t, a, "postgres") // Eve's second account
		owner, err := connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
		require.NoError(t, err)
		for _, s := range []string{
			"CREATE TABLE secrets (v text)", "INSERT INTO secrets VALUES ('the owner''s data')",
			"GRANT CONNECT ON DATABASE " + it.DatabaseName + " TO PUBLIC",
			"GRANT CONNECT ON DATABASE " + it.DatabaseName + " TO " + otherRv.DatabaseUser,
			"GRANT ALL ON secrets TO " + otherRv.DatabaseUser,
		} {
			_, err := owner.Exec(s)
			require.NoError(t, err, s)
		}
		other, err := connect(t, "postgres", it, otherRv.DatabaseUser, otherRv.Password)
		require.NoError(t, err, "Eve's other role reaches the database")
		session, err := other.Conn(ctx)
		require.NoError(t, err)
		defer session.Close()
		_, err = session.ExecContext(ctx, "INSERT INTO secrets VALUES ('eve was here')")
		require.NoError(t, err)
		credSessions := map[string]*sql.Conn{}
		for _, c := range []credView{full, readOnly} {
			pool, err := connect(t, "postgres", it, c.Username, c.Password)
			require.NoError(t, err)
			conn, err := pool.Conn(ctx)
			require.NoError(t, err)
			defer conn.Close()
			credSessions[c.Username] = conn
		}

		resetThroughMail(t, a, smtp, eve, ownerPassword)

		_, err = session.ExecContext(ctx, "SELECT count(*) FROM secrets")
		assert.Error(t, err, "the open session of Eve's other role is ended")
		_, err = connect(t, "postgres", it, otherRv.DatabaseUser, otherRv.Password)
		assert.Error(t, err, "Eve's other role no longer connects (neither through its grant nor through PUBLIC)")
		_, err = connect(t, "postgres", otherIt, otherRv.DatabaseUser, otherRv.Password)
		assert.NoError(t, err, "the other tenant still reaches its own database")

		newRv := revealPassword(t, a, signIn(t, a, eve.Email, ownerPassword), it.ID)
		pool, err := connect(t, "postgres", it, newRv.DatabaseUser, newRv.Password)
		require.NoError(t, err, "the new owner password logs in")
		var rows int
		require.NoError(t, pool.QueryRow("SELECT count(*) FROM secrets").Scan(&rows))
		assert.Equal(t, 2, rows, "the owner keeps its data")
		_, err = pool.Exec("INSERT INTO secrets VALUES ('the owner again')")
		assert.NoError(t, err, "and writes")
		for _, c := range []credView{full, readOnly} {
			var n int
			assert.NoError(t, credSessions[c.Username].QueryRowContext(ctx, "SELECT count(*) FROM secrets").Scan(&n),
				"%s: the open session of the database's own credential is kept", c.Username)
			p, err := connect(t, "postgres", it, c.Username, c.Password)
			if assert.NoError(t, err, "%s: the database's own credential still connects", c.Username) {
				assert.NoError(t, p.QueryRow("SELECT count(*) FROM secrets").Scan(&n), c.Username)
			}
		}
		_, err = credSessions[full.Username].ExecContext(ctx, "INSERT INTO secrets VALUES ('through the credential')")
		assert.NoError(t, err, "the full-access credential still writes")
	})

	t.Run("mysql", func(t *testing.T) {
		eve := a.Register(t)
		it := create(t, a, eve.Token, "mysql")
		rv := revealPassword(t, a, eve.Token, it.ID)
		_, otherRv, _ := ownedDatabase(t, a, "mysql")
		owner, err := connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
		require.NoError(t, err)
		_, err = owner.Exec("CREATE TABLE secrets (v text)")
		require.NoError(t, err)
		for _, s := range []string{
			fmt.Sprintf("GRANT SELECT ON `%s`.* TO '%s'@'%%'", it.DatabaseName, otherRv.DatabaseUser),
			fmt.Sprintf("GRANT SELECT ON `%s`.secrets TO '%s'@'%%'", it.DatabaseName, otherRv.DatabaseUser),
		} {
			_, err = owner.Exec(s)
			assert.Error(t, err, "a tenant grants nothing to another user: %s", s)
		}
	})
}
