package db_test

import (
	"context"
	neturl "net/url"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/migrations"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

func TestOpenCreatesTheDatabaseAndMigrationsRoundTrip(t *testing.T) {
	url, drop, err := testutil.CreateDatabase("dbpkg")
	require.NoError(t, err)
	t.Cleanup(drop)
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
	assert.Equal(t, []string{"20260101000000_platform", "20260101000500_widgets", "20261123000000_coherent"}, applied,
		"timestamp order across modules")
	_, pending, err := m.Status(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending)
	_, err = bdb.ExecContext(ctx, "INSERT INTO users (email) VALUES ('a@b.c')")
	require.NoError(t, err)

	rolled, err := m.Down(ctx)
	require.NoError(t, err)
	assert.Len(t, rolled, 3)
	var n int
	require.NoError(t, bdb.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('users','widgets','audit_events')").Scan(&n))
	assert.Zero(t, n, "down removes the tables")

	again, err := m.Up(ctx)
	require.NoError(t, err)
	assert.Len(t, again, 3)
	require.NoError(t, bdb.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_name IN ('users','widgets','audit_events')").Scan(&n))
	assert.Equal(t, 3, n)
}

func TestClashingMigrationNamesAreRefused(t *testing.T) {
	fs := fstest.MapFS{"20260101000000_x.up.sql": {Data: []byte("SELECT 1")}}
	_, err := db.NewMigrator(nil, []db.Migrations{{Module: "a", FS: fs}, {Module: "b", FS: fs}})
	assert.Error(t, err)
}

func TestRedactHidesPasswords(t *testing.T) {
	assert.NotContains(t, db.Redact("postgres://u:s3cret@h:5432/d"), "s3cret")
}

func TestMalformedDSNIsAnErrorNotAPanic(t *testing.T) {
	_, err := db.Open(context.Background(), "postgres://u:s3cret@127.0.0.1:5432/x?sslmode=bogus")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
}
