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

// TestLastActivityIsTheTenantsOnly: lastActivity is "the last time a session was seen or the
// database grew". The PostgreSQL engine keeps an admin session of its own in a tenant database
// after granting it a read-only credential, and a server session that comes and goes (the
// service's, an autovacuum worker's) writes or removes the server's relation cache file in the
// database's directory. Neither is the tenant's: only a tenant's session or data counts.
func TestLastActivityIsTheTenantsOnly(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "readOnly": true})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))

	get := func() item {
		var got item
		a.Get(fmt.Sprintf("/api/database-instances/%d", it.ID), admin).Decode(t, &got)
		return got
	}
	// A superuser session of the cluster into the tenant database, run and ended.
	server := func(stmt string) {
		dsn, err := url.Parse(testutil.TenantPostgresURL(t))
		require.NoError(t, err)
		dsn.Path = "/" + it.DatabaseName
		conn, err := db.Connector(dsn.String())
		require.NoError(t, err)
		pool := sql.OpenDB(conn)
		defer pool.Close()
		_, err = pool.Exec(stmt)
		require.NoError(t, err)
	}
	// The first changes a nailed catalog (the server drops its relation cache file), the next
	// connects (the server writes it again), and so on.
	sessions := []string{"GRANT SELECT ON pg_catalog.pg_class TO PUBLIC", "SELECT 1", "GRANT SELECT ON pg_catalog.pg_class TO PUBLIC", "SELECT 1"}
	for round, stmt := range sessions {
		server(stmt)
		require.NoError(t, usage.Refresh(context.Background()))
		assert.Nil(t, get().LastActivity, "refresh %d: nobody has used the database", round+1)
	}
	// A figure that drops (space the server gave back, a file left out of the figure) is no activity:
	// lastActivity is a session seen or the database grown.
	_, err := a.DB.Exec("UPDATE database_instances SET used_space_bytes = used_space_bytes + 1048576 WHERE id = ?", it.ID)
	require.NoError(t, err)
	require.NoError(t, usage.Refresh(context.Background()))
	assert.Nil(t, get().LastActivity, "a database that shrank unused")

	rv := revealPassword(t, a, u.Token, it.ID)
	_, err = connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	require.NoError(t, usage.Refresh(context.Background()))
	assert.NotNil(t, get().LastActivity, "the tenant's session is seen")
}

// TestServiceSessionsInATenantDatabaseEnd: the admin session the PostgreSQL engine opens into a
// tenant database (to grant a read-only credential, switch it read-only, …) ends once unused for
// a while (a minute; a second here), so such sessions never take the server's connection slots.
func TestServiceSessionsInATenantDatabaseEnd(t *testing.T) {
	t.Cleanup(databases.SetTenantIdleTime(time.Second)) // restored after the app has stopped
	a := start(t, nil)
	admin := a.AdminToken(t)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "readOnly": true})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))

	conn, err := db.Connector(testutil.TenantPostgresURL(t))
	require.NoError(t, err)
	cluster := sql.OpenDB(conn)
	defer cluster.Close()
	sessions := func() int {
		var n int
		require.NoError(t, cluster.QueryRow(`SELECT count(*) FROM pg_catalog.pg_stat_activity
			WHERE datname = $1 AND usename = current_user`, it.DatabaseName).Scan(&n))
		return n
	}
	require.Positive(t, sessions(), "the service's session that granted the credential")
	assert.Eventually(t, func() bool { return sessions() == 0 }, 15*time.Second, 200*time.Millisecond,
		"the service's idle session in the tenant database ends")

	// And the engine opens one again when it needs one.
	r = a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "readOnly": true})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
}

// TestLastActivityCountsAnEmptyDatabasesFirstTables: an empty MySQL/MariaDB database measures 0
// bytes. A tenant who then creates its first table in a session that ends before the next refresh
// has made the database grow, and that refresh records the activity (only a database's first
// figure is never counted as growth).
func TestLastActivityCountsAnEmptyDatabasesFirstTables(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	u := a.Register(t)
	it := create(t, a, u.Token, "mysql")
	get := func() item {
		var got item
		a.Get(fmt.Sprintf("/api/database-instances/%d", it.ID), admin).Decode(t, &got)
		return got
	}
	require.NoError(t, usage.Refresh(context.Background()))
	require.Zero(t, get().UsedSpaceBytes, "an empty database")
	require.Nil(t, get().LastActivity)

	rv := revealPassword(t, a, u.Token, it.ID)
	conn, err := connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = conn.Exec("CREATE TABLE first_table (id int PRIMARY KEY, body text)")
	require.NoError(t, err)
	require.NoError(t, conn.Close())
	root := enginePool(t, "mysql")
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, root.QueryRow("SELECT count(*) FROM information_schema.processlist WHERE user = ?", rv.DatabaseUser).Scan(&n))
		return n == 0
	}, 10*time.Second, 20*time.Millisecond, "the tenant's session has ended")

	require.NoError(t, usage.Refresh(context.Background()))
	got := get()
	assert.Positive(t, got.UsedSpaceBytes)
	assert.NotNil(t, got.LastActivity, "the database grew from 0")
}
