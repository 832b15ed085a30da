package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
)

type rotated struct {
	reveal
	PreviousUser       string     `json:"previousUser"`
	PreviousValidUntil *time.Time `json:"previousValidUntil"`
}

// rotate asks for a new password of database id with grace seconds for the old one (200 asserted).
func rotate(t *testing.T, a *apptest.App, token string, id int64, grace int) rotated {
	t.Helper()
	r := a.Post(fmt.Sprintf("/api/me/databases/%d/rotate-password", id), token, map[string]any{"gracePeriodSeconds": grace})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var out rotated
	r.Decode(t, &out)
	return out
}

// endGrace makes database id's Retiring rotations due and lets the finisher retire them.
func endGrace(t *testing.T, a *apptest.App, id int64) {
	t.Helper()
	_, err := a.DB.Exec("UPDATE database_password_rotations SET next_attempt_at = now() WHERE database_instance_id = ? AND status = 'Retiring'", id)
	require.NoError(t, err)
	a.Settle(20 * time.Second)
}

func countAudit(t *testing.T, a *apptest.App, action string, id int64) int {
	t.Helper()
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = ? AND target_id = ?", action, fmt.Sprint(id)).Scan(&n))
	return n
}

// TestRotationKeepsTheOldPasswordThroughTheGrace: a client connected with the old password keeps
// working through the grace period, the new password works at once, and what either login creates
// the other uses; at the end of the grace the old login is refused and its open session ended. A
// second rotation with no grace takes turns back to the owner role and cuts the first login off at
// once; the retirement is never done twice.
func TestRotationKeepsTheOldPasswordThroughTheGrace(t *testing.T) {
	a := start(t, nil)
	ctx := context.Background()
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it := create(t, a, u.Token, engine)
			old := revealPassword(t, a, u.Token, it.ID)
			oldPool, err := connect(t, engine, it, old.DatabaseUser, old.Password)
			require.NoError(t, err)
			session, err := oldPool.Conn(ctx)
			require.NoError(t, err)
			defer session.Close()
			_, err = session.ExecContext(ctx, "CREATE TABLE made_by_old (v int)")
			require.NoError(t, err)

			rot := rotate(t, a, u.Token, it.ID, 3600)
			assert.Equal(t, it.DatabaseUser+"_login", rot.DatabaseUser)
			assert.NotEqual(t, old.Password, rot.Password)
			assert.Contains(t, rot.ConnectionString, rot.DatabaseUser)
			assert.Equal(t, old.DatabaseUser, rot.PreviousUser)
			if assert.NotNil(t, rot.PreviousValidUntil) {
				assert.True(t, rot.PreviousValidUntil.After(time.Now().Add(59*time.Minute)))
			}
			shown := revealPassword(t, a, u.Token, it.ID)
			assert.Equal(t, rot.reveal, shown, "the reveal shows the new password")

			newPool, err := connect(t, engine, it, rot.DatabaseUser, rot.Password)
			require.NoError(t, err, "the new password works at once")
			_, err = session.ExecContext(ctx, "INSERT INTO made_by_old VALUES (1)")
			assert.NoError(t, err, "the old session keeps working")
			_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
			assert.NoError(t, err, "the old password still logs in during the grace")

			for _, s := range []string{"INSERT INTO made_by_old VALUES (2)", "CREATE TABLE made_by_new (v int)", "INSERT INTO made_by_new VALUES (3)"} {
				_, err := newPool.Exec(s)
				require.NoError(t, err, s)
			}
			var n int
			require.NoError(t, session.QueryRowContext(ctx, "SELECT count(*) FROM made_by_new").Scan(&n), "the old login uses what the new one made")
			assert.Equal(t, 1, n)
			_, err = session.ExecContext(ctx, "DROP TABLE made_by_new")
			assert.NoError(t, err, "and may drop it")
			if engine == "postgres" {
				var owner string
				require.NoError(t, newPool.QueryRow("SELECT tableowner FROM pg_tables WHERE tablename = 'made_by_old'").Scan(&owner))
				assert.Equal(t, it.DatabaseUser, owner, "objects belong to the owning role")
			}

			endGrace(t, a, it.ID)
			_, err = session.ExecContext(ctx, "SELECT 1")
			assert.Error(t, err, "the old session is ended at the end of the grace")
			_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
			assert.Error(t, err, "the old password is refused after the grace")
			require.NoError(t, newPool.QueryRow("SELECT count(*) FROM made_by_old").Scan(&n), "the new login keeps working")
			assert.Equal(t, 2, n)
			assert.Equal(t, 1, countAudit(t, a, "database.password.retired", it.ID))
			assert.Equal(t, 1, countAudit(t, a, "database.password.rotated", it.ID))

			// Turns back to the owner role, with no grace: the first login is cut off at once.
			newSession, err := newPool.Conn(ctx)
			require.NoError(t, err)
			defer newSession.Close()
			again := rotate(t, a, u.Token, it.ID, 0)
			assert.Equal(t, it.DatabaseUser, again.DatabaseUser)
			assert.Equal(t, rot.DatabaseUser, again.PreviousUser)
			assert.Nil(t, again.PreviousValidUntil)
			_, err = newSession.ExecContext(ctx, "SELECT 1")
			assert.Error(t, err, "no grace: the previous login's session ends at once")
			_, err = connect(t, engine, it, rot.DatabaseUser, rot.Password)
			assert.Error(t, err)
			p, err := connect(t, engine, it, again.DatabaseUser, again.Password)
			require.NoError(t, err)
			require.NoError(t, p.QueryRow("SELECT count(*) FROM made_by_old").Scan(&n))
			a.Settle(5 * time.Second)
			assert.Equal(t, 1, countAudit(t, a, "database.password.retired", it.ID), "retired once, by the finisher")
		})
	}
}

// TestRotationWhilePausedAndDeleted: a paused database's new login stays refused until resume, and
// the retired one stays refused after it; deleting the database drops both logins.
func TestRotationWhilePausedAndDeleted(t *testing.T) {
	a := start(t, nil)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it := create(t, a, u.Token, engine)
			old := revealPassword(t, a, u.Token, it.ID)
			first := rotate(t, a, u.Token, it.ID, 0)
			setPaused(t, a, u.Token, it.ID, true)
			_, err := connect(t, engine, it, first.DatabaseUser, first.Password)
			assert.Error(t, err, "a paused database refuses the second login too")
			second := rotate(t, a, u.Token, it.ID, 0)
			_, err = connect(t, engine, it, second.DatabaseUser, second.Password)
			assert.Error(t, err, "rotated while paused: still refused")
			setPaused(t, a, u.Token, it.ID, false)
			_, err = connect(t, engine, it, second.DatabaseUser, second.Password)
			assert.NoError(t, err, "resumed: the current password works")
			for _, c := range []reveal{old, first.reveal} {
				_, err = connect(t, engine, it, c.DatabaseUser, c.Password)
				assert.Error(t, err, "resumed: a retired password does not")
			}
			r := a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", it.ID), Token: u.Token})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			assert.False(t, existsOnEngine(t, engine, it.DatabaseUser+"_login"), "the second login is dropped with the database")
		})
	}
}

// TestRotationLeftPendingIsFinished: a rotation answered by a replica whose engines do not answer
// (as when the process dies after storing it) is 502, the old password keeps working and the
// reveal is 409 until the finisher of a replica that reaches the engine sets it; a second rotation
// meanwhile is 409. A scheduled rotation (rotationDays set by the admin update) is started and
// applied by the finisher with the configured grace.
func TestRotationLeftPendingIsFinished(t *testing.T) {
	up := start(t, map[string]any{"Databases:RotationGraceSeconds": 600})
	downCfg := engines(t)
	downCfg["ConnectionStrings:TenantPostgres"] = "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2"
	downCfg["ConnectionStrings:TenantMysql"] = "root@tcp(127.0.0.1:1)/"
	down := apptest.Start(t, apptest.With(downCfg))
	admin := up.AdminToken(t)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := up.Register(t)
			it := create(t, up, u.Token, engine)
			old := revealPassword(t, up, u.Token, it.ID)
			path := fmt.Sprintf("/api/me/databases/%d/rotate-password", it.ID)
			r := down.Post(path, u.Token, map[string]any{"gracePeriodSeconds": 60})
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			assertTriedAgainIn(t, r, "rotation")
			_, err := connect(t, engine, it, old.DatabaseUser, old.Password)
			assert.NoError(t, err, "the old password keeps working")
			assert.Equal(t, http.StatusConflict, up.Get(fmt.Sprintf("/api/me/databases/%d/password", it.ID), u.Token).Status)
			assert.Equal(t, http.StatusConflict, up.Post(path, u.Token, map[string]any{"gracePeriodSeconds": 60}).Status)

			_, err = up.DB.Exec("UPDATE database_password_rotations SET next_attempt_at = now() WHERE database_instance_id = ? AND status = 'Pending'", it.ID)
			require.NoError(t, err)
			up.Settle(20 * time.Second)
			rv := revealPassword(t, up, u.Token, it.ID)
			_, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			assert.NoError(t, err, "the finisher set the new password")
			_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
			assert.NoError(t, err, "the old one works through its grace")
			endGrace(t, up, it.ID)
			_, err = connect(t, engine, it, old.DatabaseUser, old.Password)
			assert.Error(t, err)

			r = up.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/database-instances/%d", it.ID), Token: admin,
				Body: map[string]any{"rotationDays": 30}})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			var shown struct {
				RotationDays int `json:"rotationDays"`
			}
			r.Decode(t, &shown)
			assert.Equal(t, 30, shown.RotationDays)
			var due time.Time
			require.NoError(t, up.DB.QueryRow("SELECT next_attempt_at FROM database_password_rotations WHERE database_instance_id = ? AND status = 'Scheduled'",
				it.ID).Scan(&due))
			assert.True(t, due.After(time.Now().Add(29*24*time.Hour)))
			_, err = up.DB.Exec("UPDATE database_password_rotations SET next_attempt_at = now() WHERE database_instance_id = ? AND status = 'Scheduled'", it.ID)
			require.NoError(t, err)
			up.Settle(20 * time.Second)
			next := revealPassword(t, up, u.Token, it.ID)
			assert.NotEqual(t, rv.DatabaseUser, next.DatabaseUser, "the schedule rotated it")
			for _, c := range []reveal{rv, next} {
				_, err = connect(t, engine, it, c.DatabaseUser, c.Password)
				assert.NoError(t, err, "both work during the configured grace")
			}
			var grace, scheduled int
			require.NoError(t, up.DB.QueryRow(`SELECT grace_seconds FROM database_password_rotations WHERE database_instance_id = ?
				AND status = 'Retiring'`, it.ID).Scan(&grace))
			assert.Equal(t, 600, grace)
			require.NoError(t, up.DB.QueryRow(`SELECT count(*) FROM database_password_rotations WHERE database_instance_id = ?
				AND status = 'Scheduled' AND next_attempt_at > now() + interval '29 days'`, it.ID).Scan(&scheduled))
			assert.Equal(t, 1, scheduled, "the next one is scheduled")
		})
	}
}

// TestRotationRefusesBadInput: the grace period out of range or not a number is 400 naming the
// field, with nothing stored; another user's database is 404.
func TestRotationRefusesBadInput(t *testing.T) {
	a := start(t, nil)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	path := fmt.Sprintf("/api/me/databases/%d/rotate-password", it.ID)
	for _, body := range []any{map[string]any{"gracePeriodSeconds": -1}, map[string]any{"gracePeriodSeconds": 86401},
		map[string]any{"gracePeriodSeconds": "soon"}} {
		r := a.Post(path, u.Token, body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%v: %s", body, r.Raw)
		assert.Contains(t, string(r.Raw), "gracePeriodSeconds")
	}
	other := a.Register(t)
	assert.Equal(t, http.StatusNotFound, a.Post(path, other.Token, map[string]any{"gracePeriodSeconds": 0}).Status)
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM database_password_rotations WHERE database_instance_id = ?", it.ID).Scan(&n))
	assert.Zero(t, n)
	r := a.Post("/api/me/databases", u.Token, map[string]any{"engine": "postgres", "rotationDays": 3651})
	assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))

	// Without a grace period the configured one applies (Databases:RotationGraceSeconds, an hour).
	r = a.Post(path, u.Token, map[string]any{})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var rot rotated
	r.Decode(t, &rot)
	if assert.NotNil(t, rot.PreviousValidUntil) {
		assert.True(t, rot.PreviousValidUntil.After(time.Now().Add(59*time.Minute)))
	}
}

// TestRetirementInterruptedIsFinishedOnce: the process dies after the old login was retired on
// the engine but before the rotation was recorded Done: the finisher retires it again (a no-op
// on the engine), records it once, and the new login is untouched.
func TestRetirementInterruptedIsFinishedOnce(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it := create(t, a, u.Token, engine)
			old := revealPassword(t, a, u.Token, it.ID)
			rot := rotate(t, a, u.Token, it.ID, 3600)
			require.NoError(t, databases.RetireLogin(context.Background(), engines, engine, it.DatabaseName, it.DatabaseUser, old.DatabaseUser))
			_, err := connect(t, engine, it, old.DatabaseUser, old.Password)
			require.Error(t, err)
			endGrace(t, a, it.ID)
			var status string
			require.NoError(t, a.DB.QueryRow("SELECT status FROM database_password_rotations WHERE database_instance_id = ? AND status <> 'Scheduled'",
				it.ID).Scan(&status))
			assert.Equal(t, "Done", status)
			assert.Equal(t, 1, countAudit(t, a, "database.password.retired", it.ID))
			_, err = connect(t, engine, it, rot.DatabaseUser, rot.Password)
			assert.NoError(t, err, "the new login is untouched")
		})
	}
}
