package databases_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
)

// showGrants is what SHOW GRANTS says about user@'%'.
func showGrants(t *testing.T, root *sql.DB, user string) string {
	t.Helper()
	rows, err := root.Query(fmt.Sprintf("SHOW GRANTS FOR '%s'@'%%'", user))
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		require.NoError(t, rows.Scan(&g))
		out = append(out, g)
	}
	require.NoError(t, rows.Err())
	return strings.Join(out, "\n")
}

// TestMySQLGrantsCoverTheirSchemaOnly: in the schema name of a MySQL/MariaDB GRANT `_` is a
// wildcard (grants on `u1_x`.* would cover a schema u1ax made by someone else). The owner, a
// full-access and a read-only credential of a tenant schema get nothing on a schema whose name
// differs only where the `_` is, before and after a read-only switch, and SHOW GRANTS names the
// escaped schema. Grants on the unescaped pattern are moved to the escaped name when the engine
// next touches the database.
func TestMySQLGrantsCoverTheirSchemaOnly(t *testing.T) {
	var engines *databases.Engines
	var cfg databases.Config
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines, &cfg)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	e := engines.Get("mysql")
	root := enginePool(t, "mysql")
	u := a.Register(t)
	it := create(t, a, u.Token, "mysql")
	rv := revealPassword(t, a, u.Token, it.ID)
	require.Contains(t, it.DatabaseName, "_")
	escaped := strings.ReplaceAll(it.DatabaseName, "_", `\_`)

	// Someone else's schema that the unescaped pattern matches.
	neighbour := strings.Replace(it.DatabaseName, "_", "x", 1)
	for _, s := range []string{"CREATE DATABASE " + neighbour, fmt.Sprintf("CREATE TABLE %s.secret (v varchar(20))", neighbour),
		fmt.Sprintf("INSERT INTO %s.secret VALUES ('neighbour')", neighbour)} {
		_, err := root.Exec(s)
		require.NoError(t, err, s)
	}
	t.Cleanup(func() { _, _ = root.Exec("DROP DATABASE IF EXISTS " + neighbour) })

	type cred struct {
		Username string `json:"username"`
		Password string `json:"password"`
	}
	var full, ro cred
	r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	r.Decode(t, &full)
	r = a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "readOnly": true})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	r.Decode(t, &ro)
	users := []cred{{rv.DatabaseUser, rv.Password}, full, ro}

	check := func(stage string) {
		t.Helper()
		for _, c := range users {
			conn, err := connect(t, "mysql", it, c.Username, c.Password)
			require.NoError(t, err, "%s: %s logs in", stage, c.Username)
			var n int
			assert.NoError(t, conn.QueryRow("SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&n),
				"%s: %s reaches its own schema", stage, c.Username)
			var v string
			err = conn.QueryRow(fmt.Sprintf("SELECT v FROM %s.secret", neighbour)).Scan(&v)
			assert.Error(t, err, "%s: %s reads nothing in %s (read %q)", stage, c.Username, neighbour, v)
			_, err = conn.Exec(fmt.Sprintf("INSERT INTO %s.secret VALUES ('mine')", neighbour))
			assert.Error(t, err, "%s: %s writes nothing in %s", stage, c.Username, neighbour)
			_, err = conn.Exec(fmt.Sprintf("DROP TABLE %s.secret", neighbour))
			assert.Error(t, err, "%s: %s drops nothing in %s", stage, c.Username, neighbour)
			grants := showGrants(t, root, c.Username)
			assert.Contains(t, grants, "`"+escaped+"`.*", "%s: %s", stage, c.Username)
			assert.NotContains(t, grants, "`"+it.DatabaseName+"`.*", "%s: %s", stage, c.Username)
		}
	}
	check("created")
	owner, err := connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("CREATE TABLE keep (id int PRIMARY KEY)")
	require.NoError(t, err)

	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, true))
	check("over the quota")
	owner, err = connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("INSERT INTO keep VALUES (1)")
	assert.Error(t, err, "read-only over the quota")
	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, false))
	check("back under the quota")
	owner, err = connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("INSERT INTO keep VALUES (2)")
	assert.NoError(t, err, "writable again")

	// Grants on the unescaped pattern, as a database made by an earlier release has them.
	oldGrants := func() {
		t.Helper()
		for _, c := range users {
			_, err := root.Exec(fmt.Sprintf("REVOKE ALL PRIVILEGES ON `%s`.* FROM '%s'@'%%'", escaped, c.Username))
			require.NoError(t, err)
		}
		for _, s := range []string{
			fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'%%'", it.DatabaseName, rv.DatabaseUser),
			fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'%%'", it.DatabaseName, full.Username),
			fmt.Sprintf("GRANT SELECT, SHOW VIEW ON `%s`.* TO '%s'@'%%'", it.DatabaseName, ro.Username),
		} {
			_, err := root.Exec(s)
			require.NoError(t, err, s)
		}
	}
	oldGrants()
	var v string
	legacy, err := connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	require.NoError(t, legacy.QueryRow(fmt.Sprintf("SELECT v FROM %s.secret", neighbour)).Scan(&v), "the old grant reached the neighbour")
	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, true), "an old grant does not stop the quota")
	check("old grants, over the quota")
	owner, err = connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("INSERT INTO keep VALUES (3)")
	assert.Error(t, err, "read-only over the quota")
	for _, c := range []cred{{rv.DatabaseUser, rv.Password}, full} {
		conn, err := connect(t, "mysql", it, c.Username, c.Password)
		require.NoError(t, err)
		_, err = conn.Exec("DELETE FROM keep WHERE id = 2")
		assert.NoError(t, err, "%s may still free space", c.Username)
	}
	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, false))
	check("old grants, back under the quota")
	roConn, err := connect(t, "mysql", it, ro.Username, ro.Password)
	require.NoError(t, err)
	_, err = roConn.Exec("INSERT INTO keep VALUES (4)")
	assert.Error(t, err, "the read-only credential stays read-only")
	var n int
	assert.NoError(t, roConn.QueryRow("SELECT count(*) FROM keep").Scan(&n), "and reads")

	// The old grants once more, found by the first usage refresh of a new process (its engines
	// have not escaped anything yet), with no switch or new credential to move them.
	oldGrants()
	fresh, err := databases.NewEngines(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fresh.Close() })
	_, err = fresh.Get("mysql").Usage(ctx, []string{it.DatabaseName})
	require.NoError(t, err)
	check("old grants, after the first usage refresh")
}
