package admin_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// The admin views show whether a user's email is proven (emailVerified: set by a completed reset
// through the mailed link or a sign-up from a provider's verified email), and no request sets it:
// an admin's create or update sending emailVerified: true changes nothing, and a change of the
// email un-proves it.
func TestEmailVerifiedIsShownAndNeverTakenFromARequest(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	verified := func(r *apptest.Resp) bool {
		t.Helper()
		require.Equal(t, http.StatusOK/100, r.Status/100, string(r.Raw))
		var v struct {
			EmailVerified *bool `json:"emailVerified"`
		}
		r.Decode(t, &v)
		require.NotNil(t, v.EmailVerified, "emailVerified is answered: %s", r.Raw)
		return *v.EmailVerified
	}
	tag := "proof-" + testutil.RandomSuffix()
	r := a.Post("/api/users", admin, map[string]any{"fullName": "Proof Person", "email": tag + "@corp.test",
		"password": "long-enough-password-42", "emailVerified": true})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	assert.False(t, verified(r), "a client-sent emailVerified never lands on create")
	var u struct{ ID int64 }
	r.Decode(t, &u)
	path := fmt.Sprintf("/api/users/%d", u.ID)

	for _, body := range []map[string]any{{"emailVerified": true}, {"organization": "Proof Org", "emailVerified": true}} {
		r = a.Do(apptest.Request{Method: http.MethodPut, Path: path, Token: admin, Body: body})
		assert.False(t, verified(r), "a client-sent emailVerified never lands on update (%v)", body)
	}
	assert.False(t, verified(a.Get(path, admin)))
	var proven int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM users WHERE id = ? AND email_verified_at IS NOT NULL", u.ID).Scan(&proven))
	assert.Zero(t, proven)

	// Proven as a completed reset proves it: every admin view says so.
	_, err := a.DB.Exec("UPDATE users SET email_verified_at = now() WHERE id = ?", u.ID)
	require.NoError(t, err)
	assert.True(t, verified(a.Get(path, admin)))
	var list struct {
		Items []struct {
			ID            int64 `json:"id"`
			EmailVerified bool  `json:"emailVerified"`
		} `json:"items"`
	}
	r = a.Get("/api/users?search="+tag, admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &list)
	require.Len(t, list.Items, 1, string(r.Raw))
	assert.True(t, list.Items[0].EmailVerified, "the list shows it too")

	// A change of the email un-proves it.
	r = a.Do(apptest.Request{Method: http.MethodPut, Path: path, Token: admin, Body: map[string]any{"email": "moved-" + testutil.RandomSuffix() + "@corp.test", "emailVerified": true}})
	assert.False(t, verified(r))
}
