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

// TestUsageOfEachEngineIsRecordedWhileAnotherHangs: a MySQL/MariaDB server that hangs (its
// connections stay open, nothing answers) held the usage refresh until the refresh's time ran
// out, and an engine measured after it in that refresh was not measured at all (its query ran
// on an expired context): while MySQL hung, the PostgreSQL databases' used space and read-only
// switch were skipped by every refresh that happened to ask MySQL first. Each engine is now
// measured on its own, so one engine's outage holds up no other's.
func TestUsageOfEachEngineIsRecordedWhileAnotherHangs(t *testing.T) {
	cfg, err := mysql.ParseDSN(testutil.TenantMysqlDSN())
	require.NoError(t, err)
	proxy := testutil.StartProxy(t, cfg.Addr)
	cfg.Addr = proxy.Addr
	var usage *databases.UsageRefresher
	a := start(t, map[string]any{"ConnectionStrings:TenantMysql": cfg.FormatDSN()}, apptest.WithFx(fx.Populate(&usage)))
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
