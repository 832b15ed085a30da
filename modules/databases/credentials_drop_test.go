package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
)

// TestDeletingCredentialKeepsItsTables: a table a full-access credential created holds the
// tenant's data; deleting the credential leaves the table and its rows to the database's owner,
// who reads and writes them afterwards (PostgreSQL: never DROP OWNED BY on the credential's role,
// which would drop the table with its rows; MariaDB never ties a table to a user, checked too). Over the quota (PostgreSQL: the database then belongs to the quota
// holder) the table stays readable and is the owner's again once the database is writable.
func TestDeletingCredentialKeepsItsTables(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	for _, engine := range []string{"postgres", "mysql"} {
		for _, overQuota := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/overQuota=%v", engine, overQuota), func(t *testing.T) {
				u := a.Register(t)
				it := create(t, a, u.Token, engine)
				rv := revealPassword(t, a, u.Token, it.ID)
				r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID})
				require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
				var cred struct {
					ID       int64  `json:"id"`
					Username string `json:"username"`
					Password string `json:"password"`
				}
				r.Decode(t, &cred)
				full, err := connect(t, engine, it, cred.Username, cred.Password)
				require.NoError(t, err)
				for _, s := range []string{"CREATE TABLE cred_made (id int PRIMARY KEY, v varchar(20))",
					"INSERT INTO cred_made VALUES (1, 'one'), (2, 'two')"} {
					_, err = full.Exec(s)
					require.NoError(t, err, s)
				}
				full.Close()
				if overQuota {
					require.NoError(t, engines.Get(engine).SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, true))
				}

				r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", cred.ID), Token: admin})
				require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
				assert.False(t, existsOnEngine(t, engine, cred.Username), "the credential's role is gone")
				_, err = connect(t, engine, it, cred.Username, cred.Password)
				assert.Error(t, err, "the deleted credential no longer logs in")

				owner, err := connect(t, engine, it, rv.DatabaseUser, rv.Password)
				require.NoError(t, err)
				var n int
				require.NoError(t, owner.QueryRow("SELECT count(*) FROM cred_made").Scan(&n), "the credential's table is still there")
				assert.Equal(t, 2, n, "with its rows")
				if overQuota {
					require.NoError(t, engines.Get(engine).SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, false))
					owner, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
					require.NoError(t, err)
				}
				for _, s := range []string{"INSERT INTO cred_made VALUES (3, 'three')", "ALTER TABLE cred_made ADD COLUMN w int",
					"DELETE FROM cred_made WHERE id = 1"} {
					_, err = owner.Exec(s)
					assert.NoError(t, err, "the owner has the table now: %s", s)
				}
			})
		}
	}
}

// TestCredentialsDroppedWithTheirDatabaseAreAudited: deleting a database dropped its access
// credentials without an access_credential.deleted event each, as one deleted on its own has; each
// now has one, saying why (reason database.deleted).
func TestCredentialsDroppedWithTheirDatabaseAreAudited(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	it, _, _ := ownedDatabase(t, a, "postgres")
	var ids []int64
	for _, readOnly := range []bool{true, false} {
		r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "readOnly": readOnly})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
		var cred struct {
			ID int64 `json:"id"`
		}
		r.Decode(t, &cred)
		ids = append(ids, cred.ID)
	}
	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/database-instances/%d", it.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Settle(10 * time.Second)
	for _, id := range ids {
		var n int
		require.NoError(t, a.DB.QueryRow(`SELECT count(*) FROM audit_events WHERE action = 'access_credential.deleted'
			AND target_id = ? AND details->>'reason' = 'database.deleted' AND (details->>'databaseInstanceId')::bigint = ?`,
			fmt.Sprint(id), it.ID).Scan(&n))
		assert.Equal(t, 1, n, "credential %d", id)
	}
}
