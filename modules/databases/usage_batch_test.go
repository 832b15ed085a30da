package databases_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
)

// A refresh measures every live database of an engine, however many there are: with more live
// rows than one batch takes (5,000 rows of databases the engine does not have, numbered first),
// a database made after them is measured too, on either engine. Rows of an engine this process
// does not have are left alone.
func TestUsageRefreshReadsEveryBatch(t *testing.T) {
	for engine, absent := range map[string]string{"postgres": "mysql", "mysql": "postgres"} {
		t.Run(engine, func(t *testing.T) {
			setting := map[string]string{"postgres": "ConnectionStrings:TenantPostgres", "mysql": "ConnectionStrings:TenantMysql"}[absent]
			var usage *databases.UsageRefresher
			a := start(t, map[string]any{setting: ""}, apptest.WithFx(fx.Populate(&usage)))
			u, filler := a.Register(t), a.Register(t)
			t.Cleanup(func() { _, _ = a.DB.Exec(`DELETE FROM database_instances WHERE database_name LIKE 'nobatch\_%'`) })
			_, err := a.DB.Exec(`INSERT INTO database_instances (user_id, name, engine, database_name, database_user, password_sealed, status, max_space_bytes, used_space_bytes)
				SELECT ?, 'filler', e, 'nobatch_' || e || '_' || g, 'nobatch_' || g, 'v1.x.y', 'Active', 536870912, 7
				FROM generate_series(1, 5000) g, (VALUES ('postgres'), ('mysql')) AS engines(e)`, filler.ID)
			require.NoError(t, err)
			it := create(t, a, u.Token, engine)
			const unmeasured = 123_456_789 // neither engine's figure for a fresh database
			_, err = a.DB.Exec("UPDATE database_instances SET used_space_bytes = ? WHERE id = ?", unmeasured, it.ID)
			require.NoError(t, err)

			require.NoError(t, usage.Refresh(context.Background()))
			var used int64
			require.NoError(t, a.DB.QueryRow("SELECT used_space_bytes FROM database_instances WHERE id = ?", it.ID).Scan(&used))
			assert.NotEqual(t, int64(unmeasured), used, "the database after the first batch was measured")
			var untouched int
			require.NoError(t, a.DB.QueryRow(`SELECT count(*) FROM database_instances WHERE database_name LIKE 'nobatch\_' || ? || '\_%' AND used_space_bytes = 7`,
				absent).Scan(&untouched))
			assert.Equal(t, 5000, untouched, "rows of an engine not configured here")
		})
	}
}

// A refresh whose time runs out before the last batch leaves the rest to the next refresh, which
// starts where it stopped: on an engine too slow to measure every database in one refresh, the
// databases with the highest ids are measured too, and the lowest again after them.
func TestUsageRefreshCutShortResumesWhereItStopped(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, map[string]any{"ConnectionStrings:TenantMysql": ""}, apptest.WithFx(fx.Populate(&usage)))
	t.Cleanup(databases.SetUsageBatchesPerRefresh(1))
	first, filler, last := a.Register(t), a.Register(t), a.Register(t)
	low := create(t, a, first.Token, "postgres")
	t.Cleanup(func() { _, _ = a.DB.Exec(`DELETE FROM database_instances WHERE database_name LIKE 'resume\_%'`) })
	_, err := a.DB.Exec(`INSERT INTO database_instances (user_id, name, engine, database_name, database_user, password_sealed, status, max_space_bytes, used_space_bytes)
		SELECT ?, 'filler', 'postgres', 'resume_' || g, 'resume_' || g, 'v1.x.y', 'Active', 536870912, 7
		FROM generate_series(1, 5000) g`, filler.ID)
	require.NoError(t, err)
	high := create(t, a, last.Token, "postgres")
	// Live databases from earlier tests of the package come first: a refresh takes them and
	// the filler's first ones, the next the rest, and so on until the highest is measured.
	var before int
	require.NoError(t, a.DB.QueryRow(`SELECT count(*) FROM database_instances WHERE engine = 'postgres'
		AND status IN ('Active', 'Paused') AND id < ?`, low.ID).Scan(&before))
	refreshes := (before+5002)/5000 + 1
	used := func(id int64) int64 {
		var n int64
		require.NoError(t, a.DB.QueryRow("SELECT used_space_bytes FROM database_instances WHERE id = ?", id).Scan(&n))
		return n
	}
	_, err = a.DB.Exec("UPDATE database_instances SET used_space_bytes = 0 WHERE id IN (?, ?)", low.ID, high.ID)
	require.NoError(t, err)
	for i := 0; i < refreshes; i++ {
		require.NoError(t, usage.Refresh(context.Background()))
	}
	assert.Positive(t, used(high.ID), "the database past the first batches was measured")

	_, err = a.DB.Exec("UPDATE database_instances SET used_space_bytes = 0 WHERE id = ?", low.ID)
	require.NoError(t, err)
	for i := 0; i < refreshes; i++ {
		require.NoError(t, usage.Refresh(context.Background()))
	}
	assert.Positive(t, used(low.ID), "after the highest, the lowest again")
}
