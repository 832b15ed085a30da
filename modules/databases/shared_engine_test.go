package databases_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/testutil"
)

// TestTwoDeploymentsSharingAnEngineNeverTakeEachOthersRole: two deployments on control databases
// of their own (rows numbered alike) share the tenant engines. The second one's credential with
// the first one's credential id and username (both checked the name free at once), left Creating
// by a crash, is undone by its finisher, which drops only a role carrying its own mark: the first
// deployment's role stays, with its password. With marks made of the id alone, it was dropped.
func TestTwoDeploymentsSharingAnEngineNeverTakeEachOthersRole(t *testing.T) {
	staging := start(t, map[string]any{"ConnectionStrings:Control": testutil.FreshDatabase(t, "databases_shared_a")})
	production := start(t, map[string]any{"ConnectionStrings:Control": testutil.FreshDatabase(t, "databases_shared_b")})
	admin := staging.AdminToken(t)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			it, _, _ := ownedDatabase(t, staging, engine)
			cred := createCredential(t, staging, admin, it, it.DatabaseName+"_sh")
			mine, _, _ := ownedDatabase(t, production, engine)
			_, err := production.DB.Exec(`INSERT INTO access_credentials (id, database_instance_id, username, password_sealed, status, next_attempt_at)
				VALUES (?, ?, ?, 'sealed', 'Creating', now())`, cred.ID, mine.ID, cred.Username)
			require.NoError(t, err)
			production.Settle(10 * time.Second)

			var status string
			require.NoError(t, production.DB.QueryRow("SELECT status FROM access_credentials WHERE id = ?", cred.ID).Scan(&status))
			assert.Equal(t, "Deleted", status, "the crashed create is undone")
			assert.True(t, existsOnEngine(t, engine, cred.Username), "the other deployment's role is left alone")
			_, err = connect(t, engine, it, cred.Username, cred.Password)
			assert.NoError(t, err, "and still logs in with its password")
		})
	}
}
