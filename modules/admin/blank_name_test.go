package admin_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/testutil/apptest"
)

// A fullName of white space only used to be accepted (and stored as ""): it is refused like an
// empty one, on create and on update, and the account is left as it was.
func TestBlankFullNameIsRefused(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	id := createUser(t, a, admin, "Named Person", "User")
	for _, blank := range []string{" ", " \t\n ", "\u00a0\u2003"} {
		t.Run(fmt.Sprintf("%q", blank), func(t *testing.T) {
			r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", id), Token: admin,
				Body: map[string]any{"fullName": blank}})
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.False(t, r.Env.Success)
			assert.Equal(t, []string{"fullName"}, r.Fields(), string(r.Raw))

			r = a.Post("/api/users", admin, map[string]any{"fullName": blank, "email": "blank@corp.test", "password": "long-enough-password-42"})
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.Equal(t, []string{"fullName"}, r.Fields(), string(r.Raw))
		})
	}
	r := a.Get(fmt.Sprintf("/api/users/%d", id), admin)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Contains(t, string(r.Raw), `"fullName":"Named Person"`)
}
