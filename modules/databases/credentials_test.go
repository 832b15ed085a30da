package databases_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

// enginePool is an administrator's connection to the tenant engine.
func enginePool(t *testing.T, engine string) *sql.DB {
	t.Helper()
	var pool *sql.DB
	switch engine {
	case "postgres":
		conn, err := db.Connector(testutil.TenantPostgresURL(t))
		require.NoError(t, err)
		pool = sql.OpenDB(conn)
	case "mysql":
		var err error
		pool, err = sql.Open("mysql", testutil.TenantMysqlDSN())
		require.NoError(t, err)
	}
	t.Cleanup(func() { pool.Close() })
	return pool
}

// strangerRole makes, by hand, a login role on the engine that the service knows nothing about.
func strangerRole(t *testing.T, engine, name, password string) {
	t.Helper()
	pool := enginePool(t, engine)
	switch engine {
	case "postgres":
		_, err := pool.Exec(fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, name, password))
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = pool.Exec("DROP ROLE IF EXISTS " + name) })
	case "mysql":
		_, err := pool.Exec(fmt.Sprintf(`CREATE USER '%s'@'%%' IDENTIFIED BY '%s'`, name, password))
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = pool.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", name)) })
	}
}

// TestCredentialCannotTakeOverExistingRoles: an access credential named like a role that exists
// on the engine (the database's owner, another tenant's owner, the superuser, a role made by
// hand) or like a reserved name is a 409 in the envelope, with nothing written; the victim still
// logs in with its old password and its tables are intact.
func TestCredentialCannotTakeOverExistingRoles(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			alice, bob := a.Register(t), a.Register(t)
			it := create(t, a, alice.Token, engine)
			rv := revealPassword(t, a, alice.Token, it.ID)
			owner, err := connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err)
			_, err = owner.Exec("CREATE TABLE keep (id int PRIMARY KEY)")
			require.NoError(t, err)
			_, err = owner.Exec("INSERT INTO keep VALUES (1)")
			require.NoError(t, err)
			bobs := create(t, a, bob.Token, engine)
			bobRv := revealPassword(t, a, bob.Token, bobs.ID)
			stranger, strangerPw := "stranger_"+testutil.RandomSuffix(), "Stranger-pw-"+testutil.RandomSuffix()
			strangerRole(t, engine, stranger, strangerPw)

			superuser, reserved := "postgres", "pg_monitor"
			if engine == "mysql" {
				superuser, reserved = "root", "mysql_sys"
			}
			var before int
			require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM access_credentials WHERE database_instance_id = ?", it.ID).Scan(&before))
			for _, victim := range []string{rv.DatabaseUser, it.DatabaseName, bobs.DatabaseUser, stranger, superuser, reserved} {
				for _, readOnly := range []bool{true, false} {
					r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "username": victim, "readOnly": readOnly})
					assert.Equal(t, http.StatusConflict, r.Status, "%s readOnly=%v: %s", victim, readOnly, r.Raw)
					assert.Contains(t, string(r.Raw), `"success":false`)
				}
			}
			var after int
			require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM access_credentials WHERE database_instance_id = ?", it.ID).Scan(&after))
			assert.Equal(t, before, after, "nothing is written")

			owner, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err, "the owner still logs in with its password")
			var n int
			require.NoError(t, owner.QueryRow("SELECT count(*) FROM keep").Scan(&n), "its table is intact")
			assert.Equal(t, 1, n)
			_, err = owner.Exec("INSERT INTO keep VALUES (2)")
			assert.NoError(t, err, "and writable")
			_, err = connect(t, engine, bobs, bobRv.DatabaseUser, bobRv.Password)
			assert.NoError(t, err, "the other tenant still logs in")
			err = connectAsStranger(t, engine, it, stranger, strangerPw)
			assert.NoError(t, err, "the hand-made role still logs in")
			require.NoError(t, enginePool(t, engine).Ping(), "the superuser still logs in")

			// A free name still works, and deleting it drops only that role.
			free := fmt.Sprintf("%s_extra", it.DatabaseName)
			r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "username": free})
			require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
			var cred struct {
				ID       int64  `json:"id"`
				Password string `json:"password"`
			}
			r.Decode(t, &cred)
			full, err := connect(t, engine, it, free, cred.Password)
			require.NoError(t, err)
			_, err = full.Exec("INSERT INTO keep VALUES (3)")
			assert.NoError(t, err, "a full-access credential writes")
			r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", cred.ID), Token: admin})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			assert.False(t, existsOnEngine(t, engine, free))
			_, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			assert.NoError(t, err)
		})
	}
}

// TestCredentialRolesAreMarked: the engine adopts a credential role on a retry only when it
// carries that credential's mark, and drops or re-passwords only such a role. A role without
// the mark (a tenant's owner) is ErrRoleTaken and left exactly as it was.
func TestCredentialRolesAreMarked(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	ctx := context.Background()
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			it, rv, owner := ownedDatabase(t, a, engine, "CREATE TABLE keep (id int PRIMARY KEY)")
			e := engines.Get(engine)
			mine, other := databases.CredentialMarker(900001, ""), databases.CredentialMarker(900002, "")
			user := it.DatabaseName + "_mk"

			require.NoError(t, e.CreateUser(ctx, it.DatabaseName, it.DatabaseUser, user, "First-pw-123456", true, mine))
			require.NoError(t, e.CreateUser(ctx, it.DatabaseName, it.DatabaseUser, user, "Second-pw-123456", true, mine),
				"a retry of the same credential adopts its own role")
			_, err := connect(t, engine, it, user, "Second-pw-123456")
			require.NoError(t, err)
			assert.ErrorIs(t, e.CreateUser(ctx, it.DatabaseName, it.DatabaseUser, user, "Third-pw-123456", false, other), databases.ErrRoleTaken)
			assert.ErrorIs(t, e.SetPassword(ctx, it.DatabaseName, user, "Third-pw-123456", other), databases.ErrRoleTaken)
			assert.ErrorIs(t, e.DropUser(ctx, it.DatabaseName, user, other), databases.ErrRoleTaken)
			_, err = connect(t, engine, it, user, "Second-pw-123456")
			require.NoError(t, err, "another credential's calls left the role alone")
			require.NoError(t, e.DropUser(ctx, it.DatabaseName, user, mine))
			assert.False(t, existsOnEngine(t, engine, user))
			require.NoError(t, e.DropUser(ctx, it.DatabaseName, user, mine), "dropping what is gone is fine")

			// The owner carries no mark: never adopted, re-passworded or stripped.
			assert.ErrorIs(t, e.CreateUser(ctx, it.DatabaseName, it.DatabaseUser, it.DatabaseUser, "Stolen-pw-123456", true, mine), databases.ErrRoleTaken)
			assert.ErrorIs(t, e.SetPassword(ctx, it.DatabaseName, it.DatabaseUser, "Stolen-pw-123456", mine), databases.ErrRoleTaken)
			assert.ErrorIs(t, e.DropUser(ctx, it.DatabaseName, it.DatabaseUser, mine), databases.ErrRoleTaken)
			owner, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err)
			var n int
			require.NoError(t, owner.QueryRow("SELECT count(*) FROM keep").Scan(&n))
		})
	}
}

// TestCredentialOnReadOnlyDatabase: a read-only credential can be added to a database that is
// over its quota, and a full-access credential is read-only there like the owner, on MySQL too;
// back under the quota, both owner and credential write again.
func TestCredentialOnReadOnlyDatabase(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			it, rv, owner := ownedDatabase(t, a, engine, "CREATE TABLE keep (id int PRIMARY KEY)")
			e := engines.Get(engine)
			// A full-access credential made while the database is writable.
			r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID})
			require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
			var before struct {
				Username string `json:"username"`
				Password string `json:"password"`
			}
			r.Decode(t, &before)

			require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, true))
			type cred struct {
				ID       int64  `json:"id"`
				Username string `json:"username"`
				Password string `json:"password"`
			}
			var ro, full cred
			r = a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "readOnly": true})
			require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
			r.Decode(t, &ro)
			r = a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID})
			require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
			r.Decode(t, &full)

			roConn, err := connect(t, engine, it, ro.Username, ro.Password)
			require.NoError(t, err)
			var n int
			require.NoError(t, roConn.QueryRow("SELECT count(*) FROM keep").Scan(&n))
			for i, c := range []cred{{Username: before.Username, Password: before.Password}, full} {
				conn, err := connect(t, engine, it, c.Username, c.Password)
				require.NoError(t, err)
				_, err = conn.Exec(fmt.Sprintf("INSERT INTO keep VALUES (%d)", 10+i))
				assert.Error(t, err, "%s: a full-access credential cannot write over the quota", c.Username)
			}

			require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, false))
			for i, c := range []cred{{Username: before.Username, Password: before.Password}, full} {
				conn, err := connect(t, engine, it, c.Username, c.Password)
				require.NoError(t, err)
				_, err = conn.Exec(fmt.Sprintf("INSERT INTO keep VALUES (%d)", 20+i))
				assert.NoError(t, err, "%s: back under the quota, writable", c.Username)
			}
			owner, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err)
			_, err = owner.Exec("INSERT INTO keep VALUES (30)")
			assert.NoError(t, err)
			roConn, err = connect(t, engine, it, ro.Username, ro.Password)
			require.NoError(t, err)
			_, err = roConn.Exec("INSERT INTO keep VALUES (31)")
			assert.Error(t, err, "the read-only credential stays read-only")

			r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", ro.ID), Token: admin})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			assert.False(t, existsOnEngine(t, engine, ro.Username), "deleted on the engine, nothing left behind")
		})
	}
}

// connectAsStranger logs in as a role made by hand (not by the service), to the engine's own
// database: PostgreSQL's postgres (CONNECT granted for the check), MySQL with no schema.
func connectAsStranger(t *testing.T, engine string, it item, role, password string) error {
	t.Helper()
	it.DatabaseName = ""
	if engine == "postgres" {
		it.DatabaseName = "postgres"
		_, err := enginePool(t, engine).Exec("GRANT CONNECT ON DATABASE postgres TO " + role)
		require.NoError(t, err)
	}
	_, err := connect(t, engine, it, role, password)
	return err
}

// TestUnmarkedCredentialsOfBeforeTheMark: a credential role made before roles were marked (here:
// a credential's role with its mark removed, which is exactly what the code of then made) is
// recognised by its footprint (PostgreSQL: CONNECT on its database, nothing elsewhere, a member
// of the database's login role at most; MySQL: privileges on its schema and nothing else): it can
// be rotated (was 409), pausing the database stops it (it kept logging in), and deleting it or
// its database drops it (it stayed on the engine). A role that has anything elsewhere (a
// hand-made role that also reaches another database, another tenant's owner that a credential of
// then adopted) is never taken for one: rotating it is 409, deleting its credential leaves it.
func TestUnmarkedCredentialsOfBeforeTheMark(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			pool := enginePool(t, engine)
			unmark := func(role string) {
				stmt := fmt.Sprintf("COMMENT ON ROLE %q IS NULL", role)
				if engine == "mysql" {
					stmt = fmt.Sprintf("DELETE FROM provisioner_meta.credential_users WHERE user_name = '%s'", role)
				}
				_, err := pool.Exec(stmt)
				require.NoError(t, err)
			}
			grantOn := func(it item, role string) {
				stmt := fmt.Sprintf("GRANT CONNECT ON DATABASE %q TO %q", it.DatabaseName, role)
				if engine == "mysql" {
					stmt = fmt.Sprintf("GRANT SELECT ON `%s`.* TO '%s'@'%%'", it.DatabaseName, role)
				}
				_, err := pool.Exec(stmt)
				require.NoError(t, err)
			}
			u := a.Register(t)
			it := create(t, a, u.Token, engine)
			full := createCredential(t, a, admin, it, "")
			ro := createCredentialRO(t, a, admin, it)
			fullConn, err := connect(t, engine, it, full.Username, full.Password)
			require.NoError(t, err)
			_, err = fullConn.Exec("CREATE TABLE cred_made (id int)")
			require.NoError(t, err)
			fullConn.Close()
			unmark(full.Username)
			unmark(ro.Username)

			r := rotateCredential(t, a, admin, full.ID)
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			r.Decode(t, &full)
			_, err = connect(t, engine, it, full.Username, full.Password)
			require.NoError(t, err, "the rotated password logs in")

			setPaused(t, a, u.Token, it.ID, true)
			for _, c := range []credView{full, ro} {
				_, err = connect(t, engine, it, c.Username, c.Password)
				assert.Error(t, err, "%s: a paused database lets no credential in", c.Username)
			}
			setPaused(t, a, u.Token, it.ID, false)
			for _, c := range []credView{full, ro} {
				_, err = connect(t, engine, it, c.Username, c.Password)
				assert.NoError(t, err, "%s: back after resume", c.Username)
			}

			r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", ro.ID), Token: admin})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			assert.False(t, existsOnEngine(t, engine, ro.Username), "the deleted credential's role is dropped")

			// Roles with a footprint elsewhere, named by credentials of then.
			bob := a.Register(t)
			bobs := create(t, a, bob.Token, engine)
			bobRv := revealPassword(t, a, bob.Token, bobs.ID)
			stranger, strangerPw := "stranger_"+testutil.RandomSuffix(), "Stranger-pw-"+testutil.RandomSuffix()
			strangerRole(t, engine, stranger, strangerPw)
			if engine == "mysql" {
				grantOn(bobs, stranger) // the hand-made user reaches another schema
			}
			require.NoError(t, connectAsStranger(t, engine, it, stranger, strangerPw))
			for _, victim := range []string{stranger, bobs.DatabaseUser} {
				grantOn(it, victim)
				id := leftCredential(t, a, it, victim, "Active")
				r = rotateCredential(t, a, admin, id)
				assert.Equal(t, http.StatusConflict, r.Status, "%s: %s", victim, r.Raw)
				r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", id), Token: admin})
				assert.Equal(t, http.StatusOK, r.Status, "%s: %s", victim, r.Raw)
				assert.True(t, existsOnEngine(t, engine, victim), "%s is left alone", victim)
			}
			assert.NoError(t, connectAsStranger(t, engine, it, stranger, strangerPw), "the hand-made role still logs in")
			_, err = connect(t, engine, bobs, bobRv.DatabaseUser, bobRv.Password)
			assert.NoError(t, err, "the other tenant's owner still logs in")

			r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", it.ID), Token: u.Token})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			assert.False(t, existsOnEngine(t, engine, full.Username), "the credential's role went with its database")
		})
	}
}
