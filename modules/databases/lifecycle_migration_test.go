package databases_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/testutil"
)

// TestTheLifecycleMigrationKeepsAFailedDatabasesError: before the lifecycle's error_message
// column, a Failed database showed its last attempt's error (last_error). The migration that adds
// the column copies that error into it, so a Failed database still shows it; a live database's
// leftover last_error stays unshown.
func TestTheLifecycleMigrationKeepsAFailedDatabasesError(t *testing.T) {
	url := testutil.FreshDatabase(t, "databases_lifecycle_migration")
	before := start(t, map[string]any{"ConnectionStrings:Control": url})
	u := before.Register(t)
	failed, live := create(t, before, u.Token, "postgres"), create(t, before, u.Token, "postgres")
	_, err := before.DB.Exec("UPDATE database_instances SET status = 'Failed', last_error = 'create: engine unreachable' WHERE id = ?", failed.ID)
	require.NoError(t, err)
	_, err = before.DB.Exec("UPDATE database_instances SET last_error = 'pause: engine unreachable' WHERE id = ?", live.ID)
	require.NoError(t, err)
	// The tables as they were before the migration, which is pending again.
	for _, table := range []string{"database_instances", "access_credentials", "database_password_rotations"} {
		_, err = before.DB.Exec("ALTER TABLE " + table + " DROP COLUMN error_message")
		require.NoError(t, err)
	}
	_, err = before.DB.Exec("DELETE FROM bun_migrations WHERE name = '20261129050000'")
	require.NoError(t, err)
	before.Stop()

	after := start(t, map[string]any{"ConnectionStrings:Control": url}) // applies the pending migration
	admin := after.AdminToken(t)
	shown := func(id int64) string {
		var it item
		after.Get(fmt.Sprintf("/api/database-instances/%d", id), admin).Decode(t, &it)
		return it.ErrorMessage
	}
	assert.Equal(t, "create: engine unreachable", shown(failed.ID), "the Failed database's error, as it showed before")
	assert.Empty(t, shown(live.ID), "an Active database shows no error")
}
