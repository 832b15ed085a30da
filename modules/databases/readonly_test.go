package databases_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

// TestPostgresReadOnlyCannotBeSwitchedOff: over the quota, a PostgreSQL tenant cannot write by
// turning the advisory default_transaction_read_only off, nor by granting itself INSERT, creating
// a table, a temporary table or a large object; neither can its full-access credential. It still
// reads and may DELETE and TRUNCATE to free space. Back under the quota everything is its own
// again.
func TestPostgresReadOnlyCannotBeSwitchedOff(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	it, rv, owner := ownedDatabase(t, a, "postgres", "CREATE SCHEMA app", "CREATE TABLE keep (id serial PRIMARY KEY, v int)",
		"CREATE TABLE app.more (id int)", "INSERT INTO keep (v) VALUES (1), (2)")
	r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var cred struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	r.Decode(t, &cred)
	credConn, err := connect(t, "postgres", it, cred.Username, cred.Password)
	require.NoError(t, err)
	_, err = credConn.Exec("CREATE TABLE cred_made (id int)")
	require.NoError(t, err)

	e := engines.Get("postgres")
	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, true))
	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, true), "repeatable")
	for _, who := range []struct{ user, password string }{{rv.DatabaseUser, rv.Password}, {cred.Username, cred.Password}} {
		conn, err := connect(t, "postgres", it, who.user, who.password)
		require.NoError(t, err, "reads still work")
		conn.SetMaxOpenConns(1)
		_, err = conn.Exec("SET default_transaction_read_only = off")
		require.NoError(t, err)
		// Not the owner any more: this grants nothing (a warning, not an error); the writes below prove it.
		_, _ = conn.Exec("GRANT INSERT, UPDATE ON keep, app.more, cred_made TO " + who.user)
		for _, s := range []string{
			"INSERT INTO keep (v) VALUES (3)",
			"BEGIN READ WRITE; INSERT INTO keep (v) VALUES (3); COMMIT",
			"UPDATE keep SET v = 5",
			"INSERT INTO app.more VALUES (1)",
			"INSERT INTO cred_made VALUES (1)",
			"ALTER TABLE keep OWNER TO " + who.user,
			"CREATE TABLE sneaky (id int)",
			"CREATE TABLE app.sneaky (id int)",
			"CREATE SCHEMA sneaky",
			"CREATE TEMP TABLE sneaky (id int)",
			"SELECT lo_from_bytea(0, 'x')",
			"SELECT lo_create(0)",
			"ALTER DATABASE " + it.DatabaseName + " RESET default_transaction_read_only",
		} {
			_, err = conn.Exec(s)
			assert.Error(t, err, "%s: %s", who.user, s)
			_, _ = conn.Exec("ROLLBACK")
			_, _ = conn.Exec("SET default_transaction_read_only = off")
		}
		var n int
		require.NoError(t, conn.QueryRow("SELECT count(*) FROM keep").Scan(&n), who.user)
		assert.Equal(t, 2, n)
	}
	conn, err := connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = conn.Exec("SET default_transaction_read_only = off")
	require.NoError(t, err)
	_, err = conn.Exec("DELETE FROM keep WHERE v = 2")
	assert.NoError(t, err, "space can be freed")
	_, err = conn.Exec("TRUNCATE app.more")
	assert.NoError(t, err)

	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, false))
	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, false), "repeatable")
	owner, err = connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	for _, s := range []string{"INSERT INTO keep (v) VALUES (3)", "INSERT INTO app.more VALUES (1)", "INSERT INTO cred_made VALUES (1)",
		"CREATE TABLE later (id int)", "ALTER TABLE keep ADD COLUMN w int", "CREATE TEMP TABLE tmp (id int)",
		"SELECT lo_create(0)", "DROP TABLE app.more"} {
		_, err = owner.Exec(s)
		assert.NoError(t, err, "back under the quota: %s", s)
	}
	credConn, err = connect(t, "postgres", it, cred.Username, cred.Password)
	require.NoError(t, err)
	_, err = credConn.Exec("INSERT INTO keep (v) VALUES (4)")
	assert.NoError(t, err, "the full-access credential writes again")
	var holders int
	require.NoError(t, enginePool(t, "postgres").QueryRow("SELECT count(*) FROM pg_roles WHERE rolname = $1",
		fmt.Sprintf("%s_quota", it.DatabaseName)).Scan(&holders))
	assert.Zero(t, holders, "the quota holder is gone")
}

// TestPublicSchemaIsTheOwnersOnly: in a tenant PostgreSQL database only the owner (and its
// full-access credentials) may create in schema public, whatever the server's version. The
// database is left as PostgreSQL 14 and older make it (public owned by the bootstrap superuser,
// CREATE granted to PUBLIC) and adopted by the finisher, as after a crash between CREATE
// DATABASE and recording the outcome; then a read-only credential that switches its session's
// read-only setting off cannot create a table there, and the owner still can.
func TestPublicSchemaIsTheOwnersOnly(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	it, rv, _ := ownedDatabase(t, a, "postgres")

	// What PostgreSQL 14's template1 gives every new database (the cluster here is 15 or newer).
	u, err := url.Parse(testutil.TenantPostgresURL(t))
	require.NoError(t, err)
	u.Path = "/" + it.DatabaseName
	conn, err := db.Connector(u.String())
	require.NoError(t, err)
	tenantAdmin := sql.OpenDB(conn)
	t.Cleanup(func() { tenantAdmin.Close() })
	for _, s := range []string{"ALTER SCHEMA public OWNER TO " + bootstrapSuperuser(t, tenantAdmin), "GRANT ALL ON SCHEMA public TO PUBLIC"} {
		_, err := tenantAdmin.Exec(s)
		require.NoError(t, err, s)
	}
	_, err = a.DB.Exec("UPDATE database_instances SET status = 'Provisioning', next_attempt_at = now() WHERE id = ?", it.ID)
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM database_instances WHERE id = ?", it.ID).Scan(&status))
	require.Equal(t, "Active", status, "the database is adopted")

	ro := createCredentialRO(t, a, admin, it)
	roConn, err := connect(t, "postgres", it, ro.Username, ro.Password)
	require.NoError(t, err)
	_, err = roConn.Exec("SET default_transaction_read_only = off")
	require.NoError(t, err)
	var canCreate bool
	require.NoError(t, roConn.QueryRow("SELECT has_schema_privilege('public', 'CREATE')").Scan(&canCreate))
	assert.False(t, canCreate, "the read-only credential has no CREATE on public")
	_, err = roConn.Exec("CREATE TABLE public.ro_made (id int)")
	assert.Error(t, err, "the read-only credential cannot create a table in public")

	owner, err := connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("CREATE TABLE public.owner_made (id int)")
	assert.NoError(t, err, "the owner still creates in public")
}

// bootstrapSuperuser names the role that owns schema public in PostgreSQL 14 and older.
func bootstrapSuperuser(t *testing.T, pool *sql.DB) string {
	t.Helper()
	var name string
	require.NoError(t, pool.QueryRow("SELECT quote_ident(rolname) FROM pg_roles WHERE oid = 10").Scan(&name))
	return name
}

// createCredentialRO creates a read-only credential of it.
func createCredentialRO(t *testing.T, a *apptest.App, admin string, it item) credView {
	t.Helper()
	r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "readOnly": true})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var v credView
	r.Decode(t, &v)
	return v
}
