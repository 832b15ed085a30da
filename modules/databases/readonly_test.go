package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/modules/databases"
	"provisioner/platform/testutil/apptest"
)

// TestPostgresReadOnlyCannotBeSwitchedOff: over the quota, a PostgreSQL tenant cannot write by
// turning the advisory default_transaction_read_only off, nor by granting itself INSERT, creating
// a table, a temporary table or a large object; neither can its full-access credential. It still
// reads and may DELETE and TRUNCATE to free space. Back under the quota everything is its own
// again. The old code set only default_transaction_read_only, which a session may SET off.
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
