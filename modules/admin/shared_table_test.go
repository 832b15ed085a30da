package admin_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestAUsersColumnTheAdminModelLacksIsNoObstacle: the users table is shared, and another module
// may add a column of its own to it. An administrator's create and update of an account read
// back only the columns the admin module knows, so such a column fails neither.
func TestAUsersColumnTheAdminModelLacksIsNoObstacle(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	_, err := a.DB.Exec("ALTER TABLE users ADD COLUMN another_modules_column text NOT NULL DEFAULT 'x'")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = a.DB.Exec("ALTER TABLE users DROP COLUMN IF EXISTS another_modules_column") })

	id := createUser(t, a, admin, "Shared Table", "User")
	r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", id), Token: admin,
		Body: map[string]any{"fullName": "Shared Table Renamed"}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"fullName":"Shared Table Renamed"`)
}
