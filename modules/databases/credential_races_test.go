package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestCredentialCreateOnLockedDatabaseRow: while another transaction holds the database's row
// (a rename, pause or delete in progress), a credential create answers 409 "being changed" at
// once, lists nothing afterwards, and its username is free again at once.
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
// at once answers 200 each and leaves no role on the engine.
func TestParallelCredentialsOfOneDatabase(t *testing.T) {
	// 16 changes at once: as many engine-wait slots, so none is refused for want of one.
	a := start(t, map[string]any{"Databases:MaxEngineWaits": 16})
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

// TestParallelDeletesOfOneCredential: DELETEs of one credential sent at once give one 200 (one
// audit event) and 409 "being changed" (or 404 once it is gone) for the others, as README says.
// A DELETE after one that failed (502, Deleting) still drives the drop again
// (TestCredentialDeleteIsFinished). Several rounds, each with rotations in the mix, since the
// window between the first DELETE's commit of Deleting and its drop is short.
func TestParallelDeletesOfOneCredential(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	for _, engine := range []string{"postgres", "mysql"} {
		it, _, _ := ownedDatabase(t, a, engine)
		for round := 0; round < 6; round++ {
			cr := createCredential(t, a, admin, it, "")
			var seq atomic.Int32
			answers := parallel(8, func() *apptest.Resp {
				if seq.Add(1)%4 == 0 {
					return a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/access-credentials/%d", cr.ID), Token: admin,
						Body: map[string]any{"rotatePassword": true}})
				}
				return a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", cr.ID), Token: admin})
			})
			deleted := 0
			for _, r := range answers {
				switch r.Status {
				case http.StatusOK:
					if strings.Contains(string(r.Raw), `"password"`) {
						continue // a rotation that came first
					}
					deleted++
				case http.StatusConflict:
					assert.Regexp(t, "being changed|is Deleting", string(r.Raw))
				case http.StatusNotFound:
				default:
					t.Errorf("%s round %d: %d %s", engine, round, r.Status, r.Raw)
				}
			}
			assert.LessOrEqual(t, deleted, 1, "%s round %d: one DELETE deletes, the others are 409 or 404", engine, round)
			assert.Equal(t, deleted, audited(t, a, "access_credential.deleted", cr.ID), "one change, one 200")
			if deleted == 0 { // every DELETE came while a rotation held it
				r := a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", cr.ID), Token: admin})
				require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			}
			assert.False(t, existsOnEngine(t, engine, cr.Username))
		}
	}
}

// TestParallelDeletesOfOneDatabase: as for a credential, DELETEs of one database sent at once
// give one 200 (one database.deleted) and 409 "being changed" or 404 for the others; before, one
// arriving between the first's commit of Deleting and its drop answered 200 too. Fails without
// the fix: some database gets two 200s.
func TestParallelDeletesOfOneDatabase(t *testing.T) {
	a := start(t, nil)
	for _, engine := range []string{"postgres", "mysql"} {
		u := a.Register(t)
		for round := 0; round < 4; round++ {
			it := create(t, a, u.Token, engine)
			ok := 0
			for _, r := range parallel(6, func() *apptest.Resp {
				return a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", it.ID), Token: u.Token})
			}) {
				switch r.Status {
				case http.StatusOK:
					ok++
				case http.StatusConflict:
					assert.Contains(t, string(r.Raw), "being changed")
				case http.StatusNotFound:
				default:
					t.Errorf("%s round %d: %d %s", engine, round, r.Status, r.Raw)
				}
			}
			assert.Equal(t, 1, ok, "%s round %d: one DELETE deletes, the others are 409 or 404", engine, round)
			assert.Equal(t, 1, audited(t, a, "database.deleted", it.ID))
			assert.False(t, existsOnEngine(t, engine, it.DatabaseName))
		}
	}
}
