package wfauto_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/wfauto/wfautotest"
)

// TestARedirectedDeprovisioningIsNotADeletion: a cell (or a proxy before it) that answers the
// DELETE with a redirect has deleted nothing. Followed, the redirect turned the DELETE into a GET
// (as HTTP clients do for 301/302) whose 200 counted as the deletion: the account ended
// Deprovisioned while the cell still held it. A 3xx is an answer like a 5xx: the account stays
// Deprovisioning and is retried; once the cell answers the DELETE itself, it is deleted there.
func TestARedirectedDeprovisioningIsNotADeletion(t *testing.T) {
	a, c := setup(t)
	admin := a.AdminToken(t)
	u := a.Register(t)
	r := a.Post("/api/me/wfauto/provision", u.Token, nil)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)
	key := keyOf(t, a, acc.ID)
	require.True(t, c.Held(key))

	c.SetMode(wfautotest.Redirect)
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Settle(3 * time.Second)
	var got account
	a.Get(fmt.Sprintf("/api/wfauto/accounts/%d", acc.ID), admin).Decode(t, &got)
	assert.Equal(t, "Deprovisioning", got.Status, "nothing was deleted at the cell")
	assert.Contains(t, got.ErrorMessage, "301")
	assert.True(t, c.Held(key), "the cell still holds the account")

	c.SetMode(wfautotest.OK)
	r = a.Post(fmt.Sprintf("/api/wfauto/accounts/%d/retry", acc.ID), admin, nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &got)
	assert.Equal(t, "Deprovisioned", got.Status)
	assert.False(t, c.Held(key), "deleted at the cell")
}
