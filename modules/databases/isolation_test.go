package databases_test

import (
	"context"
	"database/sql"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

// tenantConnect connects to dbName on the tenant PostgreSQL cluster as user and pings.
func tenantConnect(t *testing.T, dbName, user, password string) error {
	t.Helper()
	u, err := url.Parse(testutil.TenantPostgresURL(t))
	require.NoError(t, err)
	u.User = url.UserPassword(user, password)
	u.Path = "/" + dbName
	conn, err := db.Connector(u.String())
	require.NoError(t, err)
	pool := sql.OpenDB(conn)
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return pool.PingContext(ctx)
}

// TestTenantRolesReachOnlyTheirOwnDatabase: a tenant's role connects to its own database and to
// no other on the cluster: not postgres or template1 (PUBLIC's default CONNECT is revoked there;
// from postgres a tenant could LISTEN, NOTIFY and read every catalogue), not another tenant's.
// The control database grants PUBLIC nothing either, for the production setup where it shares
// the tenants' cluster (a tenant could otherwise forge platform/coherent's change feed).
func TestTenantRolesReachOnlyTheirOwnDatabase(t *testing.T) {
	a := start(t, nil)
	alice, bob := a.Register(t), a.Register(t)
	it := create(t, a, alice.Token, "postgres")
	rv := revealPassword(t, a, alice.Token, it.ID)
	bobs := create(t, a, bob.Token, "postgres")

	require.NoError(t, tenantConnect(t, it.DatabaseName, rv.DatabaseUser, rv.Password), "its own database")
	for _, other := range []string{"postgres", "template1", bobs.DatabaseName} {
		err := tenantConnect(t, other, rv.DatabaseUser, rv.Password)
		if assert.Error(t, err, other) {
			assert.Contains(t, err.Error(), "permission denied", other)
		}
	}

	var publicConnect bool
	require.NoError(t, a.DB.QueryRow("SELECT has_database_privilege('public', current_database(), 'CONNECT')").Scan(&publicConnect))
	assert.False(t, publicConnect, "PUBLIC may not connect to the control database")
	var mine bool
	require.NoError(t, a.DB.QueryRow("SELECT has_database_privilege(current_user, current_database(), 'CONNECT')").Scan(&mine))
	assert.True(t, mine, "the service itself still may")
}
