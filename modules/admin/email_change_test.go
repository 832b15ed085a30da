package admin_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// An admin's change of an account's email spends every outstanding reset link, as a reset does, so
// whoever reads the old mailbox (a former employee, a recycled address) cannot set the password; a
// link asked for afterwards goes to the new address and works.
func TestEmailChangeSpendsOutstandingResetLinks(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a := apptest.Start(t, apptest.With(map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port, "Frontend:BaseUrl": "http://app.test"}))
	admin := a.AdminToken(t)
	u := a.Register(t)
	tokenIn := func(msg string) string {
		_, after, found := strings.Cut(msg, "http://app.test/auth/reset-password#token=")
		require.True(t, found, msg)
		return strings.Fields(after)[0]
	}
	require.Equal(t, http.StatusOK, a.Post("/api/auth/forgot-password", "", map[string]any{"email": u.Email}).Status)
	old := tokenIn(smtp.WaitFor(t, u.Email, 10*time.Second))

	moved := "moved-" + testutil.RandomSuffix() + "@example.test"
	r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin, Body: map[string]any{"email": moved}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))

	r = a.Post("/api/auth/reset-password", "", map[string]any{"token": old, "newPassword": "the-old-mailbox-passphrase-9"})
	assert.Equal(t, http.StatusBadRequest, r.Status, "the old mailbox's link died with the change: %s", r.Raw)
	assert.Equal(t, []string{"token"}, r.Fields())
	assert.Equal(t, http.StatusOK, a.Post("/api/auth/login", "", map[string]any{"email": moved, "password": u.Password}).Status, "the password is unchanged")

	require.Equal(t, http.StatusOK, a.Post("/api/auth/forgot-password", "", map[string]any{"email": moved}).Status)
	r = a.Post("/api/auth/reset-password", "", map[string]any{"token": tokenIn(smtp.WaitFor(t, moved, 10*time.Second)), "newPassword": "the-new-mailbox-passphrase-4"})
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
}
