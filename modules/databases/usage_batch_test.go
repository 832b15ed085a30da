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
// a database made after them is measured too. Rows of an engine this process does not have are
// left alone.
func TestUsageRefreshReadsEveryBatch(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, map[string]any{"ConnectionStrings:TenantMysql": ""}, apptest.WithFx(fx.Populate(&usage)))
	u, filler := a.Register(t), a.Register(t)
	t.Cleanup(func() { _, _ = a.DB.Exec(`DELETE FROM database_instances WHERE database_name LIKE 'nobatch\_%'`) })
	_, err := a.DB.Exec(`INSERT INTO database_instances (user_id, name, engine, database_name, database_user, password_sealed, status, max_space_bytes, used_space_bytes)
		SELECT ?, 'filler', e, 'nobatch_' || e || '_' || g, 'nobatch_' || g, 'v1.x.y', 'Active', 536870912, 7
		FROM generate_series(1, 5000) g, (VALUES ('postgres'), ('mysql')) AS engines(e)`, filler.ID)
	require.NoError(t, err)
	it := create(t, a, u.Token, "postgres")
	_, err = a.DB.Exec("UPDATE database_instances SET used_space_bytes = 0 WHERE id = ?", it.ID)
	require.NoError(t, err)

	require.NoError(t, usage.Refresh(context.Background()))
	var used int64
	require.NoError(t, a.DB.QueryRow("SELECT used_space_bytes FROM database_instances WHERE id = ?", it.ID).Scan(&used))
	assert.Positive(t, used, "the database after the first batch was measured")
	var untouched int
	require.NoError(t, a.DB.QueryRow(`SELECT count(*) FROM database_instances WHERE database_name LIKE 'nobatch\_mysql\_%' AND used_space_bytes = 7`).Scan(&untouched))
	assert.Equal(t, 5000, untouched, "rows of an engine not configured here")
}
