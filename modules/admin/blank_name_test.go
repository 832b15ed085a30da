package admin_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// A fullName of white space only is refused like an empty one, on create and on update, and the
// account is left as it was.
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

// A fullName or organization with a control, bidi-override or invisible format character
// ("\u202eevil" would read reversed in every list and in the JWT's name claim) is refused naming
// the field, on create and on update, and the account stays as it was.
func TestDeceptiveNamesAreRefused(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	id := createUser(t, a, admin, "Plain Person", "User")
	for _, tc := range []struct{ field, value string }{
		{"fullName", "\u202eevil"}, {"fullName", "Eve\u0007\u001b[2J"}, {"fullName", "da\u200bta"},
		{"organization", "\u202eorg"}, {"organization", "Acme\r\nInjected: yes"},
	} {
		t.Run(fmt.Sprintf("%s %q", tc.field, tc.value), func(t *testing.T) {
			r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", id), Token: admin,
				Body: map[string]any{tc.field: tc.value}})
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.Equal(t, []string{tc.field}, r.Fields(), string(r.Raw))

			body := map[string]any{"fullName": "Fine Name", "email": "deceptive@corp.test", "password": "long-enough-password-42"}
			body[tc.field] = tc.value
			r = a.Post("/api/users", admin, body)
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.Equal(t, []string{tc.field}, r.Fields(), string(r.Raw))
		})
	}
	// Names in other scripts, with their joiners, are fine.
	r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", id), Token: admin,
		Body: map[string]any{"organization": "می\u200cخواهم"}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r = a.Get(fmt.Sprintf("/api/users/%d", id), admin)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Contains(t, string(r.Raw), `"fullName":"Plain Person"`)
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM users WHERE email = 'deceptive@corp.test'").Scan(&n))
	assert.Zero(t, n)
}
