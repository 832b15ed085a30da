package databases_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
	"provisioner/platform/testutil"
)

// behindAProxy starts the app with its MySQL/MariaDB server reached through a proxy the test can
// stall (the server then hangs: connections open, nothing answers).
func behindAProxy(t *testing.T) (*apptest.App, *databases.UsageRefresher, *testutil.TCPProxy) {
	t.Helper()
	cfg, err := mysql.ParseDSN(testutil.TenantMysqlDSN())
	require.NoError(t, err)
	proxy := testutil.StartProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr
	var usage *databases.UsageRefresher
	a := start(t, map[string]any{"ConnectionStrings:TenantMysql": cfg.FormatDSN()}, apptest.WithFx(fx.Populate(&usage)))
	return a, usage, proxy
}

// TestUsageOfEachEngineIsRecordedWhileAnotherHangs: while a MySQL/MariaDB server hangs (its
// connections stay open, nothing answers) until the refresh's time runs out, every refresh still
// measures the PostgreSQL databases: each engine is measured on its own, so one engine's outage
// holds up no other's.
func TestUsageOfEachEngineIsRecordedWhileAnotherHangs(t *testing.T) {
	a, usage, proxy := behindAProxy(t)
	u := a.Register(t)
	pg := create(t, a, u.Token, "postgres")
	create(t, a, u.Token, "mysql")

	proxy.Stall() // the MySQL server hangs
	defer proxy.Flow()
	// The engines are asked in no fixed order: several refreshes, each of which must measure
	// PostgreSQL.
	for round := 1; round <= 5; round++ {
		_, err := a.DB.Exec("UPDATE database_instances SET used_space_bytes = 0 WHERE id = ?", pg.ID)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = usage.Refresh(ctx)
		cancel()
		var used int64
		require.NoError(t, a.DB.QueryRow("SELECT used_space_bytes FROM database_instances WHERE id = ?", pg.ID).Scan(&used))
		assert.Greater(t, used, int64(0), "refresh %d: the PostgreSQL database is measured while MySQL hangs", round)
	}
}

// TestABatchTheEngineCannotMeasureInTimeIsHalved: a batch the engine could not measure before the
// refresh's time ran out is tried again with half as many databases (so an engine too slow for
// 5,000 at once is still measured, a smaller batch at a time), and doubled back once a refresh of
// that engine runs to its end; the other engine's batch is left alone.
func TestABatchTheEngineCannotMeasureInTimeIsHalved(t *testing.T) {
	a, usage, proxy := behindAProxy(t)
	u := a.Register(t)
	my := create(t, a, u.Token, "mysql")

	proxy.Stall()
	defer proxy.Flow()
	for _, want := range []int64{2500, 1250} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = usage.Refresh(ctx)
		cancel()
		assert.Equal(t, want, databases.UsageBatchOf(usage, "mysql"))
		assert.Equal(t, int64(5000), databases.UsageBatchOf(usage, "postgres"))
	}

	proxy.Flow()
	_, err := a.DB.Exec("UPDATE database_instances SET used_space_bytes = 123456789 WHERE id = ?", my.ID)
	require.NoError(t, err)
	require.NoError(t, usage.Refresh(context.Background()))
	var used int64
	require.NoError(t, a.DB.QueryRow("SELECT used_space_bytes FROM database_instances WHERE id = ?", my.ID).Scan(&used))
	assert.NotEqual(t, int64(123456789), used, "measured once the server answers")
	assert.Equal(t, int64(2500), databases.UsageBatchOf(usage, "mysql"), "doubled back after a refresh that ran to its end")
}
