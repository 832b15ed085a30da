package db_test

import (
	"bytes"
	"context"
	"log/slog"
	neturl "net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"provisioner/migrations"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

// freshDatabase creates an empty database on the machine's PostgreSQL, dropped when the test ends.
func freshDatabase(t *testing.T, label string) string {
	t.Helper()
	url, drop, err := testutil.CreateDatabase(label)
	require.NoError(t, err)
	t.Cleanup(drop)
	return url
}

func TestOpenCreatesTheDatabaseAndMigrationsRoundTrip(t *testing.T) {
	url := freshDatabase(t, "dbpkg")
	// A name that does not exist yet: Open creates it.
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	name := strings.TrimPrefix(u.Path, "/") + "_new"
	u.Path = "/" + name
	ctx := context.Background()
	bdb, err := db.Open(ctx, u.String())
	require.NoError(t, err)
	defer func() {
		bdb.Close()
		admin, err := db.Open(ctx, testutil.AdminURL())
		require.NoError(t, err)
		_, _ = admin.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
		admin.Close()
	}()

	module := fstest.MapFS{
		"20260101000500_widgets.tx.up.sql":   {Data: []byte("CREATE TABLE widgets (id bigserial PRIMARY KEY, owner bigint REFERENCES users (id));")},
		"20260101000500_widgets.tx.down.sql": {Data: []byte("DROP TABLE widgets;")},
	}
	m, err := db.NewMigrator(bdb, []db.Migrations{{Module: "widgets", FS: module}, {Module: "platform", FS: migrations.FS}})
	require.NoError(t, err)

	applied, err := m.Up(ctx)
	require.NoError(t, err)
	assert.Equal(t, []string{"20260101000000_platform", "20260101000500_widgets", "20261123000000_coherent", "20261129004800_idempotency"}, applied,
		"timestamp order across modules")
	_, pending, err := m.Status(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending)
	_, err = bdb.ExecContext(ctx, "INSERT INTO users (email) VALUES ('a@b.c')")
	require.NoError(t, err)

	rolled, err := m.Down(ctx)
	require.NoError(t, err)
	assert.Len(t, rolled, 4)
	var n int
	require.NoError(t, bdb.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('users','widgets','audit_events')").Scan(&n))
	assert.Zero(t, n, "down removes the tables")

	again, err := m.Up(ctx)
	require.NoError(t, err)
	assert.Len(t, again, 4)
	require.NoError(t, bdb.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('users','widgets','audit_events')").Scan(&n))
	assert.Equal(t, 3, n)
}

func TestClashingMigrationNamesAreRefused(t *testing.T) {
	fs := fstest.MapFS{"20260101000000_x.up.sql": {Data: []byte("SELECT 1")}}
	_, err := db.NewMigrator(nil, []db.Migrations{{Module: "a", FS: fs}, {Module: "b", FS: fs}})
	assert.Error(t, err)
}

// A Go migration is ordered with the SQL files by its timestamp, so it may not share one with a
// file (of its module or another) or another Go migration.
func TestGoMigrationTimestampsMustBeUnique(t *testing.T) {
	files := fstest.MapFS{"20260101000000_x.up.sql": {Data: []byte("SELECT 1")}, "20260101000000_x.down.sql": {Data: []byte("SELECT 1")}}
	goAt := func(name string) []db.GoMigration {
		return []db.GoMigration{{Name: name, Up: func(context.Context, bun.Tx) error { return nil }}}
	}
	_, err := db.NewMigrator(nil, []db.Migrations{{Module: "a", FS: files}, {Module: "b", Go: goAt("20260101000000_y")}})
	assert.Error(t, err, "a Go migration after another module's file")
	_, err = db.NewMigrator(nil, []db.Migrations{{Module: "b", Go: goAt("20260101000000_y")}, {Module: "a", FS: files}})
	assert.Error(t, err, "a file after another module's Go migration")
	_, err = db.NewMigrator(nil, []db.Migrations{{Module: "a", FS: files, Go: goAt("20260101000000_y")}})
	assert.Error(t, err, "a Go migration and a file of one module")
	_, err = db.NewMigrator(nil, []db.Migrations{{Module: "a", FS: files, Go: goAt("20260101000001_y")}})
	assert.NoError(t, err)
}

func TestRedactHidesPasswords(t *testing.T) {
	assert.NotContains(t, db.Redact("postgres://u:s3cret@h:5432/d"), "s3cret")
	assert.Equal(t, "postgres://u:xxxxx@h:5432/d?password=xxxxx&sslmode=disable",
		db.Redact("postgres://u:s3cret@h:5432/d?sslmode=disable&password=s3cret2"))
	// An unencoded '/' or '#' moves the password out of the user info: nothing is shown.
	assert.NotContains(t, db.Redact("postgres://u:s3/cret@h:5432/d"), "cret")
	assert.NotContains(t, db.Redact("postgres://u:s3#cret@h:5432/d"), "cret")
}

func TestMalformedDSNIsAnErrorNotAPanic(t *testing.T) {
	for _, dsn := range []string{
		"postgres://u:s3cret@127.0.0.1:5432/x?sslmode=bogus",
		// An unencoded '/' before the password: pgx would read "x:s3cret@…" as the database name
		// and quote it in the connection error.
		"postgres://u/x:s3cret@127.0.0.1:5432/d",
		"postgres://u:s3cr#et@127.0.0.1:5432/d",
	} {
		_, err := db.Open(context.Background(), dsn)
		require.Error(t, err, dsn)
		assert.NotContains(t, err.Error(), "s3cr", dsn)
	}
}

// TestAHungDatabaseFailsTheQuery: a server that stops answering (connections open, nothing comes
// back) fails a query without a deadline after the I/O bound instead of holding it for ever, a
// query whose context ends is interrupted at once even while the server is silent, and the pool
// recovers once the server answers again.
func TestAHungDatabaseFailsTheQuery(t *testing.T) {
	url := freshDatabase(t, "dbhung")
	u, err := neturl.Parse(url)
	require.NoError(t, err)
	proxy := testutil.StartProxy(t, u.Host)
	u.Host = proxy.Addr
	d, err := db.Open(context.Background(), u.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	bg := context.Background()
	// Two established connections, so both queries below wait on a read, not on a connect.
	c1, err := d.Conn(bg)
	require.NoError(t, err)
	defer c1.Close()
	c2, err := d.Conn(bg)
	require.NoError(t, err)
	defer c2.Close()
	var n int
	require.NoError(t, c1.QueryRowContext(bg, "SELECT 1").Scan(&n))
	require.NoError(t, c2.QueryRowContext(bg, "SELECT 1").Scan(&n))

	proxy.Stall()
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.Error(t, c1.QueryRowContext(ctx, "SELECT 2").Scan(&n))
	assert.Less(t, time.Since(start), 2*time.Second, "a query whose context ended is interrupted at once")

	start = time.Now()
	require.Error(t, c2.QueryRowContext(bg, "SELECT 3").Scan(&n), "a silent server fails the query")
	assert.Less(t, time.Since(start), 15*time.Second)

	proxy.Flow()
	require.Eventually(t, func() bool {
		return d.QueryRowContext(bg, "SELECT 4").Scan(&n) == nil && n == 4
	}, 20*time.Second, 50*time.Millisecond, "the pool recovers once the server answers")
}

// TestTimestampsReadBackInUTC: the contract's timestamps are UTC, also for rows returned as they
// were read (audit events), whatever time zone the service runs in.
func TestTimestampsReadBackInUTC(t *testing.T) {
	url := freshDatabase(t, "dbutc")
	d, err := db.Open(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	var got time.Time
	require.NoError(t, d.QueryRowContext(context.Background(), "SELECT '2026-11-23 10:00:00+05:30'::timestamptz").Scan(&got))
	assert.Same(t, time.UTC, got.Location())
	assert.Equal(t, "2026-11-23T04:30:00Z", got.Format(time.RFC3339))
	var row struct {
		At time.Time `bun:"at"`
	}
	require.NoError(t, d.NewSelect().ColumnExpr("'2026-11-23 10:00:00+05:30'::timestamptz AS at").Scan(context.Background(), &row))
	assert.Same(t, time.UTC, row.At.Location(), "through Bun too")
}

// TestWarningsOfTheControlDatabaseAreLogged: a data migration reports what it left alone with
// RAISE WARNING; the driver dropped every notice, so the operator never saw it.
func TestWarningsOfTheControlDatabaseAreLogged(t *testing.T) {
	var logged bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	ctx := context.Background()
	bdb, err := db.Open(ctx, freshDatabase(t, "dbwarn"))
	require.NoError(t, err)
	defer bdb.Close()
	_, err = bdb.ExecContext(ctx, `DO $$ BEGIN RAISE NOTICE 'table x does not exist, skipping'; RAISE WARNING 'users.id 7: left as it is'; END $$`)
	require.NoError(t, err)
	assert.Contains(t, logged.String(), `level=WARN msg="control database: users.id 7: left as it is"`)
	assert.NotContains(t, logged.String(), "skipping", "lesser notices stay out of the log")
}
