package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
)

// TestTenantRolesHaveAConnectionLimit: a tenant's login role, and each of its access credentials,
// may hold Databases:MaxConnectionsPerRole sessions at once, so one tenant cannot take every
// connection of the server (other tenants' and the service's own included): a fourth session is
// refused. Roles without the limit get it at the first usage refresh.
func TestTenantRolesHaveAConnectionLimit(t *testing.T) {
	var cfg databases.Config
	a := start(t, map[string]any{"Databases:MaxConnectionsPerRole": 3}, apptest.WithFx(fx.Populate(&cfg)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			root := enginePool(t, engine)
			it, rv, _ := ownedDatabase(t, a, engine) // one session open
			r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID})
			require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
			var cred credView
			r.Decode(t, &cred)
			other, orv, _ := ownedDatabase(t, a, engine)

			for i := 0; i < 2; i++ {
				_, err := connect(t, engine, it, rv.DatabaseUser, rv.Password)
				require.NoError(t, err, "session %d of 3", i+2)
			}
			_, err := connect(t, engine, it, rv.DatabaseUser, rv.Password)
			assert.Error(t, err, "a fourth session of the owner is refused")
			for i := 0; i < 3; i++ {
				_, err := connect(t, engine, it, cred.Username, cred.Password)
				require.NoError(t, err, "the credential has sessions of its own: %d of 3", i+1)
			}
			_, err = connect(t, engine, it, cred.Username, cred.Password)
			assert.Error(t, err, "a fourth session of the credential is refused")
			_, err = connect(t, engine, other, orv.DatabaseUser, orv.Password)
			assert.NoError(t, err, "another tenant still gets in")

			// A role as the engine made it before the limit: the next process's first refresh limits it.
			limitOf := func(user string) int {
				var n int
				q := "SELECT max_user_connections FROM mysql.user WHERE user = ? AND host = '%'"
				if engine == "postgres" {
					q = "SELECT rolconnlimit FROM pg_roles WHERE rolname = $1"
				}
				require.NoError(t, root.QueryRow(q, user).Scan(&n))
				return n
			}
			for _, u := range []string{rv.DatabaseUser, cred.Username} {
				s := fmt.Sprintf("ALTER USER '%s'@'%%' WITH MAX_USER_CONNECTIONS 0", u)
				if engine == "postgres" {
					s = fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT -1", u)
				}
				_, err := root.Exec(s)
				require.NoError(t, err)
			}
			fresh, err := databases.NewEngines(cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = fresh.Close() })
			_, err = fresh.Get(engine).Usage(ctx, []string{it.DatabaseName})
			require.NoError(t, err)
			assert.Equal(t, 3, limitOf(rv.DatabaseUser), "the owner is limited again")
			assert.Equal(t, 3, limitOf(cred.Username), "the credential is limited again")
		})
	}
}
