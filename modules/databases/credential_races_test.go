package databases_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCredentialCreateOnLockedDatabaseRow: while another transaction holds the database's row
// (a rename, pause or delete in progress), a credential create answers 409 "being changed" at
// once, lists nothing afterwards, and its username is free again at once. Before, the refused
// lock aborted the request's transaction, the undo then failed in it (25P02): 500, and the row
// stayed Creating (listed, its username "taken") until the finisher undid it a minute later.
func TestCredentialCreateOnLockedDatabaseRow(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	it, _, _ := ownedDatabase(t, a, "postgres")
	username := it.DatabaseName + "_stuck"

	hold, err := a.DB.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = hold.Rollback() })
	_, err = hold.Exec("UPDATE database_instances SET updated_at = updated_at WHERE id = ?", it.ID)
	require.NoError(t, err)

	r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "username": username})
	assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), "being changed")
	assert.Empty(t, listCredentials(t, a, admin, it), "nothing is left listed")
	assert.False(t, existsOnEngine(t, "postgres", username), "nothing is made on the engine")
	require.NoError(t, hold.Rollback())

	cr := createCredential(t, a, admin, it, username) // the username is free at once
	_, err = connect(t, "postgres", it, username, cr.Password)
	assert.NoError(t, err)
}
