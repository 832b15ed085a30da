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

// strictApp is an app against a strict cell (bodies fingerprinted per Idempotency-Key) whose
// calls time out after 1 s, with Finisher:MaxAttempts attempts.
func strictApp(t *testing.T, maxAttempts int) (*apptest.App, *wfautotest.Cell) {
	c := newCell(t)
	c.SetStrict(true)
	a := apptest.Start(t, apptest.With(map[string]any{"WfautoProvisioning:BaseUrl": c.URL, "WfautoProvisioning:ApiKey": cellKey,
		"WfautoProvisioning:TimeoutSeconds": 1, "RateLimit:Register": "1000-M", "Finisher:MaxAttempts": maxAttempts}))
	t.Cleanup(func() { _, _ = a.DB.Exec("UPDATE wfauto_accounts SET status = 'Failed' WHERE status = 'Pending'") })
	return a, c
}

// timedOut provisions u's account against a cell that makes it but answers too late.
func timedOut(t *testing.T, a *apptest.App, c *wfautotest.Cell, u apptest.User) account {
	t.Helper()
	c.SetHang(1500 * time.Millisecond)
	_, acc := provisionWhile(t, a, c, wfautotest.Hang, u.Token)
	time.Sleep(600 * time.Millisecond) // the hung handler finishes on the cell's side
	require.True(t, c.Held(keyOf(t, a, acc.ID)), "the cell holds the account")
	return acc
}

// rename changes u's full name, as an admin can at any time.
func rename(t *testing.T, a *apptest.App, admin string, u apptest.User) {
	t.Helper()
	r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin,
		Body: map[string]any{"fullName": "X Renamed"}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
}

// sentNames are the fullName of every POST the cell got for Idempotency-Key key.
func sentNames(c *wfautotest.Cell, key string) []any {
	var out []any
	for _, p := range c.Posts() {
		if p.Key == key {
			out = append(out, p.Body["fullName"])
		}
	}
	return out
}

// TestARetryAfterARenameSendsTheBodyFirstSent: a create that timed out (the cell made the account)
// is retried after the owner was renamed. The retry sends the body first sent under the
// Idempotency-Key, so a strict cell returns the account instead of answering 422 (which made it
// Failed, with the account left at the cell).
func TestARetryAfterARenameSendsTheBodyFirstSent(t *testing.T) {
	a, c := strictApp(t, 8)
	admin := a.AdminToken(t)
	u := a.Register(t)
	acc := timedOut(t, a, c, u)
	require.Equal(t, "Pending", acc.Status)
	rename(t, a, admin, u)

	_, err := a.DB.Exec("UPDATE wfauto_accounts SET next_attempt_at = now() WHERE id = ?", acc.ID)
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	var list []account
	a.Get("/api/me/wfauto", u.Token).Decode(t, &list)
	require.Len(t, list, 1)
	assert.Equal(t, "Active", list[0].Status, list[0].ErrorMessage)
	assert.Equal(t, c.AccountOf(keyOf(t, a, acc.ID)), list[0].ExternalAccountID)
	assert.Equal(t, []any{"Test User", "Test User"}, sentNames(c, keyOf(t, a, acc.ID)), "the same key went with the same body")
}

// TestDeletingARenamedUserDeprovisionsTheAccountAtTheCell: the account's create reached the cell
// but timed out and attempts ran out (Failed); the owner was then renamed and deleted. The re-post
// that learns the account's id sends the body first sent, so a strict cell returns the account and
// it is deleted there. (The re-post sent the current name; the cell's 422 was taken for "nothing
// there" and the account was Deprovisioned with the account left at the cell.)
func TestDeletingARenamedUserDeprovisionsTheAccountAtTheCell(t *testing.T) {
	a, c := strictApp(t, 1)
	admin := a.AdminToken(t)
	u := a.Register(t)
	acc := timedOut(t, a, c, u)
	require.Equal(t, "Failed", acc.Status, "attempts ran out (Finisher:MaxAttempts 1)")
	rename(t, a, admin, u)

	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Settle(5 * time.Second)
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&status))
	assert.Equal(t, "Deprovisioned", status)
	assert.False(t, c.Held(keyOf(t, a, acc.ID)), "deleted at the cell")
	assert.Equal(t, []any{"Test User", "Test User"}, sentNames(c, keyOf(t, a, acc.ID)))
	assert.Equal(t, 1, c.Creates())
}

// TestDeprovisioningWaitsForADefiniteAnswer: a Failed account whose create may have reached the
// cell (a 5xx) is deleted with its owner. Only the cell's 400 to the body first sent says nothing
// is there. A 409, or a malformed 2xx, leaves it Deprovisioning, its error shown to an admin and
// retried; once the cell answers, the account it holds is deleted there.
func TestDeprovisioningWaitsForADefiniteAnswer(t *testing.T) {
	a, c := strictApp(t, 1)
	admin := a.AdminToken(t)
	deleteOwner := func(t *testing.T, mode wfautotest.Mode) (account, apptest.User) {
		u := a.Register(t)
		c.SetMode(wfautotest.Fail500)
		r := a.Post("/api/me/wfauto/provision", u.Token, nil)
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		var acc account
		r.Decode(t, &acc)
		require.Equal(t, "Failed", acc.Status)
		c.SetMode(mode)
		r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		a.Settle(5 * time.Second)
		return acc, u
	}
	deletes := func() int { return len(c.Deleted()) }

	t.Run("400 to the body first sent", func(t *testing.T) {
		acc, _ := deleteOwner(t, wfautotest.Refuse400)
		c.SetMode(wfautotest.OK)
		var status string
		require.NoError(t, a.DB.QueryRow("SELECT status FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&status))
		assert.Equal(t, "Deprovisioned", status)
		assert.False(t, c.Held(keyOf(t, a, acc.ID)))
	})
	t.Run("409, then a malformed answer, then the account", func(t *testing.T) {
		deleted0 := deletes()
		acc, _ := deleteOwner(t, wfautotest.Conflict409)
		var got account
		r := a.Get(fmt.Sprintf("/api/wfauto/accounts/%d", acc.ID), admin)
		r.Decode(t, &got)
		assert.Equal(t, "Deprovisioning", got.Status, "a 409 does not say the cell holds nothing")
		assert.Contains(t, got.ErrorMessage, "409")
		assert.Contains(t, got.ErrorMessage, "may be at the cell")
		assert.Equal(t, deleted0, deletes(), "nothing deleted yet")

		c.SetMode(wfautotest.Garbage) // the cell makes the account, its answer is garbage
		r = a.Post(fmt.Sprintf("/api/wfauto/accounts/%d/retry", acc.ID), admin, nil)
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		r.Decode(t, &got)
		assert.Equal(t, "Deprovisioning", got.Status, "a malformed answer does not say the cell holds nothing")
		assert.Contains(t, got.ErrorMessage, "malformed")
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
		require.True(t, c.Held(keyOf(t, a, acc.ID)))

		c.SetMode(wfautotest.OK)
		r = a.Post(fmt.Sprintf("/api/wfauto/accounts/%d/retry", acc.ID), admin, nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		r.Decode(t, &got)
		assert.Equal(t, "Deprovisioned", got.Status)
		assert.False(t, c.Held(keyOf(t, a, acc.ID)), "deleted at the cell")
	})
}

// TestARefusedBodyIsNotPinned: a create that may have reached the cell (a 5xx) and whose retry
// the cell then refused with a 400 holds nothing at the cell; the account, provisioned again after
// its owner's details were fixed, sends them as they are now (only a body the cell may hold an
// account for is sent again).
func TestARefusedBodyIsNotPinned(t *testing.T) {
	a, c := strictApp(t, 8)
	admin := a.AdminToken(t)
	u := a.Register(t)
	c.SetMode(wfautotest.Fail500)
	r := a.Post("/api/me/wfauto/provision", u.Token, nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)
	require.Equal(t, "Pending", acc.Status)
	c.SetMode(wfautotest.Refuse400)
	r = a.Post(fmt.Sprintf("/api/wfauto/accounts/%d/retry", acc.ID), admin, nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	r.Decode(t, &acc)
	require.Equal(t, "Failed", acc.Status)
	c.SetMode(wfautotest.OK)
	rename(t, a, admin, u)
	r = a.Post("/api/me/wfauto/provision", u.Token, nil)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	assert.Equal(t, []any{"X Renamed"}, sentNames(c, keyOf(t, a, acc.ID)), "the owner's current details, not the refused body")
}

// TestAMalformedAnswerToTheProvisioningIsRetried: the cell makes the account and answers with a
// 2xx that is not the documented JSON (a proxy's page, a mangled body). The account stays Pending
// (502 with Retry-After) and the finisher's retry, with the same Idempotency-Key, gets the cell's
// account: Active with it, one account at the cell. When attempts run out first, the account ends
// Failed and deleting its owner re-posts the key and deletes the account at the cell.
func TestAMalformedAnswerToTheProvisioningIsRetried(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		a, c := setup(t)
		admin := a.AdminToken(t)
		u := a.Register(t)
		r, acc := provisionWhile(t, a, c, wfautotest.Garbage, u.Token)
		assert.Equal(t, "Pending", acc.Status, "the cell holds the account: not Failed")
		assert.Contains(t, acc.ErrorMessage, "malformed answer")
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
		require.True(t, c.Held(keyOf(t, a, acc.ID)))

		r = a.Post(fmt.Sprintf("/api/wfauto/accounts/%d/retry", acc.ID), admin, nil)
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		r.Decode(t, &acc)
		assert.Equal(t, "Active", acc.Status)
		assert.Equal(t, c.AccountOf(keyOf(t, a, acc.ID)), acc.ExternalAccountID, "the account the cell made")
		assert.Equal(t, 1, c.Creates(), "made once")
	})
	t.Run("attempts run out", func(t *testing.T) {
		a, c := strictApp(t, 1)
		admin := a.AdminToken(t)
		u := a.Register(t)
		r, acc := provisionWhile(t, a, c, wfautotest.Garbage, u.Token)
		assert.Equal(t, "Failed", acc.Status)
		assert.Contains(t, acc.ErrorMessage, "malformed answer")
		require.True(t, c.Held(keyOf(t, a, acc.ID)))

		r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		a.Settle(5 * time.Second)
		var status string
		require.NoError(t, a.DB.QueryRow("SELECT status FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&status))
		assert.Equal(t, "Deprovisioned", status)
		assert.False(t, c.Held(keyOf(t, a, acc.ID)), "deleted at the cell")
	})
}
