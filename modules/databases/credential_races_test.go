package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/testutil/apptest"
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

// TestParallelCredentialsOfOneDatabase: many credential creates (full access and read-only) on
// one PostgreSQL database at once all answer 201 and every credential logs in; deleting them all
// at once answers 200 each and leaves no role on the engine. Before, concurrent GRANTs on the
// same database or schema failed with the engine's "tuple concurrently updated" (502, the role
// undone), and concurrent DROP OWNED BY the same way (502, left Deleting for the finisher).
func TestParallelCredentialsOfOneDatabase(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	it, _, _ := ownedDatabase(t, a, "postgres")
	const n = 16
	var seq atomic.Int32
	answers := parallel(n, func() *apptest.Resp {
		i := seq.Add(1)
		return a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID,
			"username": fmt.Sprintf("%s_p%d", it.DatabaseName, i), "readOnly": i%2 == 0})
	})
	var made []credView
	for _, r := range answers {
		if !assert.Equal(t, http.StatusCreated, r.Status, string(r.Raw)) {
			continue
		}
		var cr credView
		r.Decode(t, &cr)
		made = append(made, cr)
	}
	for _, cr := range made {
		_, err := connect(t, "postgres", it, cr.Username, cr.Password)
		assert.NoError(t, err, "%s logs in", cr.Username)
	}
	require.Len(t, made, n)

	var next atomic.Int32
	for _, r := range parallel(n, func() *apptest.Resp {
		cr := made[next.Add(1)-1]
		return a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", cr.ID), Token: admin})
	}) {
		assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	}
	for _, cr := range made {
		assert.False(t, existsOnEngine(t, "postgres", cr.Username), "%s is dropped", cr.Username)
	}
	assert.Empty(t, listCredentials(t, a, admin, it))
}
