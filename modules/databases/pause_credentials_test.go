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

func rotateCredential(t *testing.T, a *apptest.App, admin string, id int64) *apptest.Resp {
	t.Helper()
	return a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/access-credentials/%d", id), Token: admin,
		Body: map[string]any{"rotatePassword": true}})
}

func setPaused(t *testing.T, a *apptest.App, token string, id int64, pause bool) {
	t.Helper()
	verb := map[bool]string{true: "pause", false: "resume"}[pause]
	r := a.Post(fmt.Sprintf("/api/me/databases/%d/%s", id, verb), token, nil)
	require.Equal(t, http.StatusOK, r.Status, "%s: %s", verb, r.Raw)
}

// TestPauseStopsEveryCredential: a paused database can no longer be reached, through its owner
// role or any access credential. Pausing refuses the logins of the credentials made before
// and ends their open sessions; one rotated while paused and one created while paused do not
// log in either; resuming lets the Active credentials (and the owner) in again.
func TestPauseStopsEveryCredential(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	ctx := context.Background()
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it := create(t, a, u.Token, engine)
			rv := revealPassword(t, a, u.Token, it.ID)
			before := createCredential(t, a, admin, it, "")
			pool, err := connect(t, engine, it, before.Username, before.Password)
			require.NoError(t, err)
			session, err := pool.Conn(ctx)
			require.NoError(t, err)
			defer session.Close()

			setPaused(t, a, u.Token, it.ID, true)
			_, err = session.ExecContext(ctx, "SELECT 1")
			assert.Error(t, err, "the credential's open session is ended")
			_, err = connect(t, engine, it, before.Username, before.Password)
			assert.Error(t, err, "a credential made before the pause is refused")
			_, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			assert.Error(t, err, "the owner is refused")

			r := rotateCredential(t, a, admin, before.ID)
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			var rotated credView
			r.Decode(t, &rotated)
			_, err = connect(t, engine, it, before.Username, rotated.Password)
			assert.Error(t, err, "a credential rotated while paused is refused")

			during := createCredential(t, a, admin, it, "")
			_, err = connect(t, engine, it, during.Username, during.Password)
			assert.Error(t, err, "a credential created while paused is refused")

			setPaused(t, a, u.Token, it.ID, false)
			for _, c := range []struct{ user, pw string }{{before.Username, rotated.Password}, {during.Username, during.Password}, {rv.DatabaseUser, rv.Password}} {
				_, err = connect(t, engine, it, c.user, c.pw)
				assert.NoError(t, err, "%s logs in again after resume", c.user)
			}
		})
	}
}

// TestResumeLeavesDeletingCredentialsBlocked: resume allows the Active credentials only; a
// credential whose delete failed (Deleting, its role still on the engine) stays refused.
func TestResumeLeavesDeletingCredentialsBlocked(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	gone := createCredential(t, a, admin, it, "")
	_, err := a.DB.Exec("UPDATE access_credentials SET status = 'Deleting', next_attempt_at = now() + interval '1 hour' WHERE id = ?", gone.ID)
	require.NoError(t, err)
	setPaused(t, a, u.Token, it.ID, true)
	setPaused(t, a, u.Token, it.ID, false)
	_, err = connect(t, "postgres", it, gone.Username, gone.Password)
	assert.Error(t, err, "a Deleting credential is not let in again")
	var login bool
	require.NoError(t, enginePool(t, "postgres").QueryRow("SELECT rolcanlogin FROM pg_roles WHERE rolname = $1", gone.Username).Scan(&login))
	assert.False(t, login)
}

// TestUnfinishedPauseAndResumeAreFinished: pause and resume are stored as intent (Pausing,
// Resuming) before the engine is asked. When the engine is down the answer is 502 with the
// database Pausing (or Resuming), a short errorMessage and a Retry-After; when the process died
// after storing the intent the row is Pausing (or Resuming) with nothing done on the engine. The finisher completes each
// once the engine answers: every login refused (owner and credentials) for a pause, the owner
// and the Active credentials let in again for a resume.
func TestUnfinishedPauseAndResumeAreFinished(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	down := apptest.Start(t, apptest.With(map[string]any{
		"ConnectionStrings:TenantPostgres": "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		"ConnectionStrings:TenantMysql":    "root@tcp(127.0.0.1:1)/?timeout=2s",
	}))
	status := func(id int64) string {
		var s string
		require.NoError(t, a.DB.QueryRow("SELECT status FROM database_instances WHERE id = ?", id).Scan(&s))
		return s
	}
	settle := func(id int64) {
		_, err := a.DB.Exec("UPDATE database_instances SET next_attempt_at = now() WHERE id = ?", id)
		require.NoError(t, err)
		a.Settle(10 * time.Second)
	}
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it := create(t, a, u.Token, engine)
			rv := revealPassword(t, a, u.Token, it.ID)
			cr := createCredential(t, a, admin, it, "")

			r := down.Post(fmt.Sprintf("/api/me/databases/%d/pause", it.ID), u.Token, nil)
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			assertTriedAgainIn(t, r, "pause")
			var failed item
			r.Decode(t, &failed)
			assert.Equal(t, "Pausing", failed.Status)
			assert.Equal(t, "pause: engine unreachable", failed.ErrorMessage)
			r = a.Post(fmt.Sprintf("/api/me/databases/%d/resume", it.ID), u.Token, nil)
			assert.Equal(t, http.StatusConflict, r.Status, "an unfinished pause is not resumed: %s", r.Raw)
			settle(it.ID)
			assert.Equal(t, "Paused", status(it.ID))
			for _, c := range []struct{ user, pw string }{{cr.Username, cr.Password}, {rv.DatabaseUser, rv.Password}} {
				_, err := connect(t, engine, it, c.user, c.pw)
				assert.Error(t, err, "%s is refused once the pause is finished", c.user)
			}

			// A resume the engine does not answer: 502, Resuming, finished once the engine answers.
			r = down.Post(fmt.Sprintf("/api/me/databases/%d/resume", it.ID), u.Token, nil)
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			assertTriedAgainIn(t, r, "resume")
			r.Decode(t, &failed)
			assert.Equal(t, "Resuming", failed.Status)
			settle(it.ID)
			assert.Equal(t, "Active", status(it.ID))
			for _, c := range []struct{ user, pw string }{{cr.Username, cr.Password}, {rv.DatabaseUser, rv.Password}} {
				_, err := connect(t, engine, it, c.user, c.pw)
				assert.NoError(t, err, "%s logs in once the resume is finished", c.user)
			}

			// A crash right after the pause's intent was stored.
			_, err := a.DB.Exec("UPDATE database_instances SET status = 'Pausing' WHERE id = ?", it.ID)
			require.NoError(t, err)
			settle(it.ID)
			assert.Equal(t, "Paused", status(it.ID))
			_, err = connect(t, engine, it, cr.Username, cr.Password)
			assert.Error(t, err)
			assert.Equal(t, 1, audited(t, a, "database.paused", it.ID), "the pause is audited once, when asked")

			// A crash right after the resume's intent was stored.
			_, err = a.DB.Exec("UPDATE database_instances SET status = 'Resuming' WHERE id = ?", it.ID)
			require.NoError(t, err)
			settle(it.ID)
			assert.Equal(t, "Active", status(it.ID))
			_, err = connect(t, engine, it, cr.Username, cr.Password)
			assert.NoError(t, err, "the credential logs in once the resume is finished")
		})
	}
}

// TestPausedPostgresDatabaseRefusesEveryRole: the owner of a PostgreSQL database granted CONNECT
// on it to PUBLIC and to another tenant's credential; once the database is paused neither that
// tenant's login role nor its credential connects, and the session the tenant had open there is
// ended. Resuming lets the owner in again, not the others: the grants the pause revoked are not
// given back.
func TestPausedPostgresDatabaseRefusesEveryRole(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	ctx := context.Background()
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	rv := revealPassword(t, a, u.Token, it.ID)
	otherIt, otherRv, _ := ownedDatabase(t, a, "postgres")
	otherCred := createCredential(t, a, admin, otherIt, "")
	owner, err := connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	for _, s := range []string{"GRANT CONNECT ON DATABASE " + it.DatabaseName + " TO PUBLIC",
		"GRANT CONNECT ON DATABASE " + it.DatabaseName + " TO " + otherCred.Username} {
		_, err = owner.Exec(s)
		require.NoError(t, err, s)
	}
	strangers := []struct{ user, pw string }{{otherRv.DatabaseUser, otherRv.Password}, {otherCred.Username, otherCred.Password}}
	pool, err := connect(t, "postgres", it, strangers[0].user, strangers[0].pw)
	require.NoError(t, err, "the other tenant connects through PUBLIC")
	session, err := pool.Conn(ctx)
	require.NoError(t, err)
	defer session.Close()

	setPaused(t, a, u.Token, it.ID, true)
	_, err = session.ExecContext(ctx, "SELECT current_user, current_database()")
	assert.Error(t, err, "the other tenant's open session is ended")
	for _, s := range strangers {
		_, err = connect(t, "postgres", it, s.user, s.pw)
		assert.Error(t, err, "%s cannot reach the paused database", s.user)
	}

	setPaused(t, a, u.Token, it.ID, false)
	_, err = connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	assert.NoError(t, err, "the owner connects after resume")
	for _, s := range strangers {
		_, err = connect(t, "postgres", it, s.user, s.pw)
		assert.Error(t, err, "%s: the grants the pause revoked are not given back", s.user)
	}
	_, err = connect(t, "postgres", otherIt, otherCred.Username, otherCred.Password)
	assert.NoError(t, err, "the other tenant's credential still reaches its own database")
}
