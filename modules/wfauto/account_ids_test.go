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

// TestAnAccountIdHeldByAnotherAccountIsRefused: a cell that answers a provision with the
// accountId of another user's live account is refused: the account is Failed with a sanitised
// message and the id is not stored; deleting its user (the re-post of its key answered with that
// id again) does not delete the other user's account at the cell.
func TestAnAccountIdHeldByAnotherAccountIsRefused(t *testing.T) {
	a, c := setup(t)
	admin := a.AdminToken(t)
	alice, bob := a.Register(t), a.Register(t)
	r := a.Post("/api/me/wfauto/provision", alice.Token, nil)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var first account
	r.Decode(t, &first)

	c.SetDup(first.ExternalAccountID)
	r = a.Post("/api/me/wfauto/provision", bob.Token, nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)
	assert.Equal(t, "Failed", acc.Status)
	assert.Contains(t, acc.ErrorMessage, "belongs to another account")
	assert.Empty(t, acc.ExternalAccountID)

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", bob.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Settle(5 * time.Second)
	c.SetMode(wfautotest.OK)
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&status))
	assert.Equal(t, "Deprovisioned", status)
	assert.NotContains(t, c.Deleted(), first.ExternalAccountID, "alice's account is not deleted at the cell")

	// The index refuses a second live holder whatever the code does.
	_, err := a.DB.Exec("UPDATE wfauto_accounts SET external_account_id = ? WHERE id = ?", first.ExternalAccountID, acc.ID)
	require.NoError(t, err, "a Deprovisioned row may keep any id")
	_, err = a.DB.Exec("INSERT INTO wfauto_accounts (user_id, status, external_account_id) VALUES (?, 'Failed', ?)", bob.ID, first.ExternalAccountID)
	require.Error(t, err)
}

// TestDeprovisioningNeverDeletesAnotherAccountsId: an account whose provisioning answer was lost
// (Pending, no accountId recorded) is deprovisioned when its user is deleted by re-posting its
// Idempotency-Key to learn its id. A cell that answers that re-post with the accountId of another
// user's live account gets nothing deleted: the account ends Deprovisioned, and the other user's
// account is not deleted at the cell and stays Active.
func TestDeprovisioningNeverDeletesAnotherAccountsId(t *testing.T) {
	a, c := setup(t)
	admin := a.AdminToken(t)
	alice, bob := a.Register(t), a.Register(t)
	r := a.Post("/api/me/wfauto/provision", alice.Token, nil)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var first account
	r.Decode(t, &first)

	c.SetMode(wfautotest.Garbage) // the cell makes bob's account; its answer cannot be read
	r = a.Post("/api/me/wfauto/provision", bob.Token, nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)
	require.Equal(t, "Pending", acc.Status)
	require.Empty(t, acc.ExternalAccountID)

	c.SetDup(first.ExternalAccountID) // the re-post of bob's key is answered with alice's accountId
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", bob.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Settle(5 * time.Second)
	c.SetMode(wfautotest.OK)

	var status, external string
	require.NoError(t, a.DB.QueryRow("SELECT status, external_account_id FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&status, &external))
	assert.Equal(t, "Deprovisioned", status)
	assert.Empty(t, external, "alice's accountId is not stored for bob's account")
	assert.NotContains(t, c.Deleted(), first.ExternalAccountID, "alice's account is not deleted at the cell")
	var list []account
	a.Get("/api/me/wfauto", alice.Token).Decode(t, &list)
	require.Len(t, list, 1)
	assert.Equal(t, "Active", list[0].Status)
	assert.Equal(t, first.ExternalAccountID, list[0].ExternalAccountID)
}

// withoutExternalIDIndex drops the partial unique index on wfauto_accounts.external_account_id for
// the rest of the test, as a database is left where its migration (20261125000100) found
// duplicates and skipped it. The index is recreated when the test ends, once rows (the test's
// duplicates) are deleted. The package's tests share one database but never run in parallel.
func withoutExternalIDIndex(t *testing.T, a *apptest.App, rows ...int64) {
	t.Helper()
	_, err := a.DB.Exec("DROP INDEX wfauto_accounts_external_uq")
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, id := range rows {
			_, err := a.DB.Exec("DELETE FROM wfauto_cell_creates WHERE account_id = ?", id)
			assert.NoError(t, err)
			_, err = a.DB.Exec("DELETE FROM wfauto_accounts WHERE id = ?", id)
			assert.NoError(t, err)
		}
		_, err := a.DB.Exec(`CREATE UNIQUE INDEX IF NOT EXISTS wfauto_accounts_external_uq ON wfauto_accounts (external_account_id)
			WHERE external_account_id <> '' AND status <> 'Deprovisioned'`)
		assert.NoError(t, err, "the index is back for the next tests")
	})
}

// TestDeprovisioningAnAccountWhoseStoredIdAnotherAccountHolds: where the unique index was skipped,
// two live accounts may hold one accountId. Deleting the user of one of them never deprovisions
// that id at the cell (the other user's account would be gone): it is left there, the account
// ends Deprovisioned, audited with details.leftAtCell; the other account stays Active and at the
// cell.
func TestDeprovisioningAnAccountWhoseStoredIdAnotherAccountHolds(t *testing.T) {
	a, c := setup(t)
	admin := a.AdminToken(t)
	alice, bob := a.Register(t), a.Register(t)
	var first, mine account
	a.Post("/api/me/wfauto/provision", alice.Token, nil).Decode(t, &first)
	a.Post("/api/me/wfauto/provision", bob.Token, nil).Decode(t, &mine)
	require.Equal(t, "Active", first.Status)
	require.Equal(t, "Active", mine.Status)

	// An old duplicate: bob's account holds alice's accountId.
	withoutExternalIDIndex(t, a, first.ID, mine.ID)
	_, err := a.DB.Exec("UPDATE wfauto_accounts SET external_account_id = ? WHERE id = ?", first.ExternalAccountID, mine.ID)
	require.NoError(t, err)

	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", bob.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Settle(5 * time.Second)

	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM wfauto_accounts WHERE id = ?", mine.ID).Scan(&status))
	assert.Equal(t, "Deprovisioned", status)
	assert.True(t, c.Held(keyOf(t, a, first.ID)), "alice's account is still at the cell")
	var list []account
	a.Get("/api/me/wfauto", alice.Token).Decode(t, &list)
	require.Len(t, list, 1)
	assert.Equal(t, "Active", list[0].Status)
	assert.Equal(t, first.ExternalAccountID, list[0].ExternalAccountID)
	var external, left string
	require.NoError(t, a.DB.QueryRow("SELECT details->>'externalAccountId', coalesce(details->>'leftAtCell', '') FROM audit_events "+
		"WHERE action = 'wfauto.deprovisioned' AND target_id = ?", fmt.Sprint(mine.ID)).Scan(&external, &left))
	assert.Equal(t, first.ExternalAccountID, external)
	assert.Equal(t, "held by another account", left, "the audit says why the cell's account was left")
}
