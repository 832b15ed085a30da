package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
)

// setMaxSpace sets a database's quota as an admin.
func setMaxSpace(t *testing.T, a *apptest.App, admin string, id, bytes int64) {
	t.Helper()
	r := a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/database-instances/%d", id), Token: admin,
		Body: map[string]any{"maxSpaceBytes": bytes}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
}

// adminItem is the database as an admin sees it.
func adminItem(t *testing.T, a *apptest.App, admin string, id int64) item {
	t.Helper()
	var got item
	a.Get(fmt.Sprintf("/api/database-instances/%d", id), admin).Decode(t, &got)
	return got
}

// TestMySQLQuotaCountsStoredProgramsAndViews: a MySQL/MariaDB tenant's stored procedures, views
// and triggers are kept by the server outside its tables (mysql.proc, .frm and .TRG files), and
// their definitions count in the used space: a tenant with a 1 MiB quota storing megabytes in
// procedure bodies goes read-only, and read-only refuses creating procedures, functions, views,
// triggers and events.
func TestMySQLQuotaCountsStoredProgramsAndViews(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	it, rv, owner := ownedDatabase(t, a, "mysql", "CREATE TABLE small (id int PRIMARY KEY)")
	setMaxSpace(t, a, admin, it.ID, 1<<20)
	require.NoError(t, usage.Refresh(ctx))
	require.False(t, adminItem(t, a, admin, it.ID).ReadOnly, "an empty database is under its quota")

	body := strings.Repeat("x", 400_000)
	for i := 0; i < 2; i++ {
		_, err := owner.Exec(fmt.Sprintf("CREATE PROCEDURE p%d() SELECT '%s'", i, body))
		require.NoError(t, err)
	}
	_, err := owner.Exec(fmt.Sprintf("CREATE VIEW v AS SELECT '%s' AS c", body))
	require.NoError(t, err)
	_, err = owner.Exec(fmt.Sprintf("CREATE TRIGGER tr BEFORE INSERT ON small FOR EACH ROW SET @x = '%s'", body))
	require.NoError(t, err)
	require.NoError(t, usage.Refresh(ctx))
	got := adminItem(t, a, admin, it.ID)
	assert.Greater(t, got.UsedSpaceBytes, int64(4*len(body)), "the definitions count")
	require.True(t, got.ReadOnly, "over the quota through definitions alone: read-only")

	owner, err = connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	for _, s := range []string{
		"CREATE PROCEDURE p9() SELECT 1",
		"CREATE FUNCTION f9() RETURNS int RETURN 1",
		"CREATE VIEW v9 AS SELECT 1 AS c",
		"CREATE TRIGGER tr9 AFTER DELETE ON small FOR EACH ROW SET @y = 1",
		"CREATE EVENT e9 ON SCHEDULE EVERY 1 HOUR DO SELECT 1",
		"CREATE TABLE t9 (id int)",
	} {
		_, err := owner.Exec(s)
		assert.Error(t, err, "read-only: %s", s)
	}
	var n int
	require.NoError(t, owner.QueryRow("SELECT count(*) FROM information_schema.routines WHERE routine_schema = DATABASE()").Scan(&n))
	assert.Equal(t, 2, n, "nothing was created")

	// Dropping them frees the space (the owner keeps ALTER ROUTINE on what it created, and DROP
	// is given back with the switch).
	setMaxSpace(t, a, admin, it.ID, 100<<20)
	require.NoError(t, usage.Refresh(ctx))
	got = adminItem(t, a, admin, it.ID)
	assert.False(t, got.ReadOnly, "back under the quota")
	owner, err = connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	for _, s := range []string{"DROP PROCEDURE p0", "DROP PROCEDURE p1", "DROP VIEW v", "DROP TRIGGER tr"} {
		_, err := owner.Exec(s)
		require.NoError(t, err, s)
	}
	require.NoError(t, usage.Refresh(ctx))
	assert.Less(t, adminItem(t, a, admin, it.ID).UsedSpaceBytes, int64(len(body)), "dropped definitions no longer count")
}

// TestMySQLReadOnlyEndsAfterDelete: over its quota a MySQL/MariaDB tenant keeps DELETE so it can
// free space, but InnoDB's data_length comes from statistics refreshed only now and then, which a
// read-only tenant may not refresh (ANALYZE is refused). The refresher has the engine analyze the
// tables of read-only databases before measuring them, so after the tenant empties its table the
// next refreshes see the delete and make it writable again. The table keeps InnoDB from recalculating its
// statistics by itself (STATS_AUTO_RECALC=0, the tenant's own option), which makes the stale
// figure last as it did in the probe rather than until a background recalculation. The quota is
// 8 MiB: the table's file keeps counting InnoDB's reserve of free extents (about 4 MiB, see
// TestMySQLQuotaCountsTablesWithFrozenStatistics) after the delete, while the stale statistic
// (about 12 MB) stays over 90 % of it.
func TestMySQLReadOnlyEndsAfterDelete(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	it, rv, owner := ownedDatabase(t, a, "mysql", "CREATE TABLE `big``one` (id int PRIMARY KEY AUTO_INCREMENT, body longtext) ENGINE=InnoDB STATS_AUTO_RECALC=0",
		"INSERT INTO `big``one` (body) SELECT REPEAT('x', 2000) FROM seq_1_to_5000")
	_, err := enginePool(t, "mysql").Exec(fmt.Sprintf("ANALYZE TABLE `%s`.`big``one`", it.DatabaseName))
	require.NoError(t, err)
	setMaxSpace(t, a, admin, it.ID, 8<<20)
	require.NoError(t, usage.Refresh(ctx))
	got := adminItem(t, a, admin, it.ID)
	require.Greater(t, got.UsedSpaceBytes, int64(10<<20))
	full := got.UsedSpaceBytes
	require.True(t, got.ReadOnly, "over the quota")

	owner, err = connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("ANALYZE TABLE `big``one`")
	require.Error(t, err, "the read-only tenant cannot refresh the statistics itself")
	_, err = owner.Exec("DELETE FROM `big``one`")
	require.NoError(t, err, "DELETE is kept to free space")

	assert.Eventually(t, func() bool {
		require.NoError(t, usage.Refresh(ctx))
		got = adminItem(t, a, admin, it.ID)
		return !got.ReadOnly
	}, 30*time.Second, time.Second, "the delete brings it back under the quota (last seen %d bytes)", got.UsedSpaceBytes)
	assert.Less(t, got.UsedSpaceBytes, full/2)
	owner, err = connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("INSERT INTO `big``one` (body) VALUES ('again')")
	assert.NoError(t, err, "writable again")
}

// TestMySQLTenantsHaveNoEventPrivilege: an event runs by itself as its definer, even while the
// definer's account is locked (a paused tenant's events would go on running with
// event_scheduler=ON); tenants are not promised events, so neither the owner nor a full-access
// credential is granted EVENT, before or after a read-only switch, while everything else on the
// schema (routines, triggers, views) stays theirs. Users granted everything lose EVENT at a
// process's first usage refresh.
func TestMySQLTenantsHaveNoEventPrivilege(t *testing.T) {
	var engines *databases.Engines
	var cfg databases.Config
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines, &cfg)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	root := enginePool(t, "mysql")
	it, rv, _ := ownedDatabase(t, a, "mysql", "CREATE TABLE t (id int PRIMARY KEY)")
	r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var cred credView
	r.Decode(t, &cred)
	users := [][2]string{{rv.DatabaseUser, rv.Password}, {cred.Username, cred.Password}}

	check := func(stage string) {
		t.Helper()
		for i, u := range users {
			conn, err := connect(t, "mysql", it, u[0], u[1])
			require.NoError(t, err)
			_, err = conn.Exec(fmt.Sprintf("CREATE EVENT e%d ON SCHEDULE EVERY 1 MINUTE DO DELETE FROM t", i))
			assert.Error(t, err, "%s: %s may not create an event", stage, u[0])
			for _, s := range []string{
				fmt.Sprintf("CREATE PROCEDURE p%d() SELECT 1", i), fmt.Sprintf("DROP PROCEDURE p%d", i),
				fmt.Sprintf("CREATE TRIGGER tr%d BEFORE INSERT ON t FOR EACH ROW SET @x = 1", i), fmt.Sprintf("DROP TRIGGER tr%d", i),
				fmt.Sprintf("CREATE VIEW v%d AS SELECT 1 AS c", i), fmt.Sprintf("DROP VIEW v%d", i),
			} {
				_, err := conn.Exec(s)
				assert.NoError(t, err, "%s: %s: %s", stage, u[0], s)
			}
			grants := showGrants(t, root, u[0])
			assert.NotContains(t, grants, "EVENT", stage)
			assert.NotContains(t, grants, "ALL PRIVILEGES", stage)
		}
	}
	check("created")
	e := engines.Get("mysql")
	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, true))
	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, false))
	check("writable again")

	// As the engine granted before: everything, EVENT included.
	escaped := strings.ReplaceAll(it.DatabaseName, "_", `\_`)
	for _, u := range users {
		_, err := root.Exec(fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'%%'", escaped, u[0]))
		require.NoError(t, err)
	}
	require.Contains(t, showGrants(t, root, rv.DatabaseUser), "ALL PRIVILEGES")
	fresh, err := databases.NewEngines(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = fresh.Close() })
	_, err = fresh.Get("mysql").Usage(ctx, []string{it.DatabaseName})
	require.NoError(t, err)
	check("after the first usage refresh")
}

// TestMySQLQuotaCountsTablesWithFrozenStatistics: InnoDB's data_length is a statistic, and a
// tenant may keep it from ever being recalculated (CREATE TABLE … STATS_AUTO_RECALC=0, or ALTER
// TABLE to it). Used space counts at least what the tables' files take on disk less their free
// extents, which the tenant cannot freeze: after the tenant writes many times its quota, the next
// refresh sees the writes and makes the database read-only.
func TestMySQLQuotaCountsTablesWithFrozenStatistics(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	it, rv, owner := ownedDatabase(t, a, "mysql",
		"CREATE TABLE frozen (id int PRIMARY KEY AUTO_INCREMENT, body varchar(3000)) ENGINE=InnoDB STATS_AUTO_RECALC=0",
		"CREATE TABLE later (id int PRIMARY KEY AUTO_INCREMENT, body varchar(3000)) ENGINE=InnoDB",
		"ALTER TABLE later STATS_AUTO_RECALC=0",
		"ANALYZE TABLE frozen, later")
	setMaxSpace(t, a, admin, it.ID, 8<<20)
	require.NoError(t, usage.Refresh(ctx))
	got := adminItem(t, a, admin, it.ID)
	require.False(t, got.ReadOnly, "empty tables are under the quota")
	require.Less(t, got.UsedSpaceBytes, int64(1<<20))

	// About 12 MB in each table; the statistics still say 16 KiB each.
	for _, s := range []string{
		"INSERT INTO frozen (body) SELECT REPEAT('x', 2000) FROM seq_1_to_5000",
		"INSERT INTO later (body) SELECT REPEAT('y', 2000) FROM seq_1_to_5000",
	} {
		_, err := owner.Exec(s)
		require.NoError(t, err, s)
	}
	var stats int64
	require.NoError(t, owner.QueryRow(`SELECT SUM(data_length + index_length) FROM information_schema.tables
		WHERE table_schema = DATABASE()`).Scan(&stats))
	require.Less(t, stats, int64(1<<20), "the statistics are frozen (else this test proves nothing)")

	require.NoError(t, usage.Refresh(ctx))
	got = adminItem(t, a, admin, it.ID)
	assert.Greater(t, got.UsedSpaceBytes, int64(20<<20), "the rows written count")
	require.True(t, got.ReadOnly, "over the quota: read-only at the next refresh")
	owner, err := connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("INSERT INTO frozen (body) VALUES ('more')")
	assert.Error(t, err, "read-only refuses further writes")
}

// TestMySQLTablesOfUnmeasuredEnginesKeepItReadOnly: information_schema.tables reports a data_length
// of 0 for a CSV table however large its .CSV file grows, so a table in an engine whose size the
// server does not report (anything outside InnoDB, MyISAM, Aria, MEMORY, MRG_MyISAM,
// ARCHIVE, BLACKHOLE, SEQUENCE) keeps the database read-only, whatever its quota, with a
// readOnlyReason naming the table; read-only keeps DROP, so the tenant drops it (after reading
// its rows out) and the database is writable again at the next refresh, where it can recreate
// the table in InnoDB.
func TestMySQLTablesOfUnmeasuredEnginesKeepItReadOnly(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	u := a.Register(t)
	it := create(t, a, u.Token, "mysql")
	rv := revealPassword(t, a, u.Token, it.ID)
	owner, err := connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	setMaxSpace(t, a, admin, it.ID, 1<<20)
	require.NoError(t, usage.Refresh(ctx))
	got := adminItem(t, a, admin, it.ID)
	require.False(t, got.ReadOnly, "an empty database is under its quota")
	assert.Empty(t, got.ReadOnlyReason)

	for _, s := range []string{
		"CREATE TABLE `c``sv` (a text NOT NULL) ENGINE=CSV",
		"INSERT INTO `c``sv` SELECT REPEAT('x', 10000) FROM seq_1_to_300", // 3 MB, 0 to information_schema
	} {
		_, err := owner.Exec(s)
		require.NoError(t, err, s)
	}
	require.NoError(t, usage.Refresh(ctx))
	got = adminItem(t, a, admin, it.ID)
	require.True(t, got.ReadOnly, "a CSV table cannot be measured: read-only (used %d bytes)", got.UsedSpaceBytes)
	assert.Contains(t, got.ReadOnlyReason, "c`sv (CSV)")
	var mine []item
	a.Get("/api/me/databases", u.Token).Decode(t, &mine)
	reason := ""
	for _, m := range mine {
		if m.ID == it.ID {
			reason = m.ReadOnlyReason
		}
	}
	assert.Equal(t, got.ReadOnlyReason, reason, "the owner sees why")

	owner, err = connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	for _, s := range []string{
		"INSERT INTO `c``sv` VALUES ('more')",
		"CREATE TABLE c2 (a text NOT NULL) ENGINE=CSV",
		"ALTER TABLE `c``sv` ENGINE=InnoDB",
	} {
		_, err := owner.Exec(s)
		assert.Error(t, err, "read-only: %s", s)
	}
	var n int
	require.NoError(t, owner.QueryRow("SELECT COUNT(*) FROM `c``sv`").Scan(&n))
	assert.Equal(t, 300, n, "its rows can still be read out")

	// A quota raise does not end it: the table's size is still unknown.
	setMaxSpace(t, a, admin, it.ID, 1<<30)
	require.NoError(t, usage.Refresh(ctx))
	require.True(t, adminItem(t, a, admin, it.ID).ReadOnly, "still unmeasured")

	_, err = owner.Exec("DROP TABLE `c``sv`")
	require.NoError(t, err, "read-only keeps DROP")
	require.NoError(t, usage.Refresh(ctx))
	got = adminItem(t, a, admin, it.ID)
	assert.False(t, got.ReadOnly, "writable again once it is dropped")
	assert.Empty(t, got.ReadOnlyReason)
	owner, err = connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("CREATE TABLE c (a text NOT NULL) ENGINE=InnoDB")
	assert.NoError(t, err, "writable again")
}

// TestMySQLReadOnlyFromBeforeGetsDropForUnmeasuredTables: a database switched read-only before
// read-only kept DROP (its users hold SELECT, DELETE, SHOW VIEW) that has a CSV table would stay
// read-only for that table with no way to drop it: the refresher switches it read-only again
// when the table first counts, which grants DROP. Fails without the re-switch: DROP is refused.
func TestMySQLReadOnlyFromBeforeGetsDropForUnmeasuredTables(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	it, rv, _ := ownedDatabase(t, a, "mysql", "CREATE TABLE c (a text NOT NULL) ENGINE=CSV")
	// As the service left a database over its quota before: the old grant, no reason recorded.
	root := enginePool(t, "mysql")
	escaped := strings.ReplaceAll(it.DatabaseName, "_", `\_`)
	_, err := root.Exec(fmt.Sprintf("REVOKE ALL PRIVILEGES ON `%s`.* FROM '%s'@'%%'", escaped, rv.DatabaseUser))
	require.NoError(t, err)
	_, err = root.Exec(fmt.Sprintf("GRANT SELECT, DELETE, SHOW VIEW ON `%s`.* TO '%s'@'%%'", escaped, rv.DatabaseUser))
	require.NoError(t, err)
	_, err = a.DB.Exec("UPDATE database_instances SET read_only = true, read_only_reason = '' WHERE id = ?", it.ID)
	require.NoError(t, err)

	require.NoError(t, usage.Refresh(ctx))
	got := adminItem(t, a, admin, it.ID)
	require.True(t, got.ReadOnly)
	assert.Contains(t, got.ReadOnlyReason, "c (CSV)")
	owner, err := connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("DROP TABLE c")
	require.NoError(t, err, "the switch again granted DROP")
	require.NoError(t, usage.Refresh(ctx))
	assert.False(t, adminItem(t, a, admin, it.ID).ReadOnly, "writable once it is dropped")
}
