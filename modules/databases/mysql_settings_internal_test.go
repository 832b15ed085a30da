package databases

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/testutil"
)

// TestMySQLSettingWarnings: the engine warns, once per setting and saying what to set, about a
// server with symbolic links (a tenant's CREATE TABLE … DATA DIRECTORY places files anywhere
// mysqld may write) and one that runs events (they run even while their definer is locked,
// i.e. paused). Against the test server it warns exactly about what that server has.
func TestMySQLSettingWarnings(t *testing.T) {
	assert.Empty(t, mysqlSettingWarnings(map[string]string{"have_symlink": "DISABLED", "event_scheduler": "OFF"}))
	assert.Empty(t, mysqlSettingWarnings(map[string]string{}), "a server without the variables")
	w := mysqlSettingWarnings(map[string]string{"have_symlink": "YES", "event_scheduler": "ON"})
	require.Len(t, w, 2)
	assert.Contains(t, w[0], "symbolic-links=0")
	assert.Contains(t, w[1], "event_scheduler=OFF")
	assert.Len(t, mysqlSettingWarnings(map[string]string{"have_symlink": "NO", "event_scheduler": "DISABLED"}), 0)

	e, err := newMySQL(testutil.TenantMysqlDSN(), EnginePublic{}, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	got, err := e.ServerWarnings(context.Background())
	require.NoError(t, err)
	root, err := sql.Open("mysql", testutil.TenantMysqlDSN())
	require.NoError(t, err)
	t.Cleanup(func() { root.Close() })
	var symlink, events string
	require.NoError(t, root.QueryRow("SELECT @@have_symlink, @@event_scheduler").Scan(&symlink, &events))
	joined := strings.Join(got, "\n")
	if symlink == "YES" {
		assert.Contains(t, joined, "have_symlink=YES")
	} else {
		assert.NotContains(t, joined, "have_symlink")
	}
	if events == "ON" {
		assert.Contains(t, joined, "event_scheduler=ON")
	} else {
		assert.NotContains(t, joined, "event_scheduler")
	}
}
