package databases_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
)

// TestPostgresQuotaCountsSharedCatalogs: a PostgreSQL tenant owns its database, so it may COMMENT
// ON DATABASE and ALTER DATABASE … SET search_path to any text, and every role may ALTER ROLE
// itself SET …: the cluster keeps these in shared catalogs (pg_shdescription,
// pg_db_role_setting) that pg_database_size does not count. They count in the used space: a
// tenant storing megabytes there goes read-only, and read-only (the database owned by the quota
// holder) refuses commenting on it or changing its settings; what its roles still set on
// themselves beyond 64 KiB is reset at the next refresh.
func TestPostgresQuotaCountsSharedCatalogs(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	it, rv, owner := ownedDatabase(t, a, "postgres")
	require.NoError(t, usage.Refresh(ctx))
	// pg_database_size moves by a few hundred KiB between refreshes (free space and visibility
	// maps, checkpoints): the figures below are MBs, the bounds leave half a MB either way.
	base := adminItem(t, a, admin, it.ID).UsedSpaceBytes
	require.Positive(t, base)
	setMaxSpace(t, a, admin, it.ID, base+4<<20)

	owner.SetMaxOpenConns(1)
	write := func(stmt string, n int) {
		t.Helper()
		_, err := owner.Exec(fmt.Sprintf(stmt, "'"+strings.Repeat("c", n)+"'"))
		require.NoError(t, err, stmt)
	}
	write("COMMENT ON DATABASE "+it.DatabaseName+" IS %s", 3_000_000)
	require.NoError(t, usage.Refresh(ctx))
	got := adminItem(t, a, admin, it.ID)
	assert.GreaterOrEqual(t, got.UsedSpaceBytes, base+2_500_000, "the database's comment counts")
	require.False(t, got.ReadOnly, "still under the quota")

	write("ALTER DATABASE "+it.DatabaseName+" SET search_path = %s", 1_000_000)
	write("ALTER ROLE "+rv.DatabaseUser+" SET search_path = %s", 1_500_000)
	require.NoError(t, usage.Refresh(ctx))
	got = adminItem(t, a, admin, it.ID)
	assert.GreaterOrEqual(t, got.UsedSpaceBytes, base+5_000_000, "the database's and the role's settings count")
	require.True(t, got.ReadOnly, "over the quota through the shared catalogs alone: read-only")

	owner, err := connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	owner.SetMaxOpenConns(1)
	_, err = owner.Exec("SET default_transaction_read_only = off")
	require.NoError(t, err)
	for _, s := range []string{
		"COMMENT ON DATABASE " + it.DatabaseName + " IS 'more'",
		"ALTER DATABASE " + it.DatabaseName + " SET search_path = 'more'",
	} {
		_, err := owner.Exec(s)
		assert.Error(t, err, "read-only: %s", s)
	}
	// A role may always set its own defaults: over the quota, what it sets beyond 64 KiB is reset
	// at the next refresh (the service's default_transaction_read_only of a credential stays).
	write("ALTER ROLE "+rv.DatabaseUser+" SET search_path = %s", 1_500_000)
	write("ALTER ROLE "+rv.DatabaseUser+" IN DATABASE "+it.DatabaseName+" SET search_path = %s", 1_000_000)
	write("ALTER ROLE "+rv.DatabaseUser+" IN DATABASE postgres SET search_path = %s", 1_000_000)
	require.NoError(t, usage.Refresh(ctx))
	got = adminItem(t, a, admin, it.ID)
	assert.True(t, got.ReadOnly, "still over the quota")
	var left int
	require.NoError(t, enginePool(t, "postgres").QueryRow(`SELECT count(*) FROM pg_db_role_setting s JOIN pg_roles r ON r.oid = s.setrole
		WHERE r.rolname = $1 AND array_to_string(s.setconfig, ',') LIKE '%search_path%'`, rv.DatabaseUser).Scan(&left))
	assert.Zero(t, left, "the role's own settings are reset")
	assert.Less(t, got.UsedSpaceBytes, base+4_500_000, "and no longer count")
	assert.GreaterOrEqual(t, got.UsedSpaceBytes, base+3_500_000, "the comment and the database's setting still do")
}
