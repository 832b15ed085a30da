package wfauto_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/wfauto/cell"
	"provisioner/modules/wfauto/wfautotest"
	"provisioner/platform/testutil"
)

// deployment starts an app on control database url against cell c: staging and production, or a
// production restored from a backup, sharing one provisioning cell with one API key.
func deployment(t *testing.T, c *wfautotest.Cell, url string) *apptest.App {
	t.Helper()
	a := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:Control": url, "WfautoProvisioning:BaseUrl": c.URL,
		"WfautoProvisioning:ApiKey": cellKey, "WfautoProvisioning:TimeoutSeconds": 1, "RateLimit:Register": "1000-M"}))
	return a
}

// provisioned provisions u's account on a and returns it Active.
func provisioned(t *testing.T, a *apptest.App, u apptest.User) account {
	t.Helper()
	r := a.Post("/api/me/wfauto/provision", u.Token, nil)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)
	require.Equal(t, "Active", acc.Status)
	return acc
}

// accountOf is u's only account on a.
func accountOf(t *testing.T, a *apptest.App, u apptest.User) account {
	t.Helper()
	var list []account
	a.Get("/api/me/wfauto", u.Token).Decode(t, &list)
	require.Len(t, list, 1)
	return list[0]
}

// TestTwoDeploymentsSharingACellGiveEachUserTheirOwnAccount: the first account of each of two
// control databases has the same local id; the cell, which answers a repeated Idempotency-Key with
// its first answer, must still make one account per user. Keyed by the local id, the second
// user was answered with the first one's account, and stored Active.
func TestTwoDeploymentsSharingACellGiveEachUserTheirOwnAccount(t *testing.T) {
	for _, echo := range []bool{false, true} {
		t.Run(fmt.Sprintf("echo=%v", echo), func(t *testing.T) {
			c := newCell(t)
			c.SetEcho(echo)
			staging := deployment(t, c, testutil.FreshDatabase(t, "wfauto_shared_a"))
			production := deployment(t, c, testutil.FreshDatabase(t, "wfauto_shared_b"))
			alice, bob := staging.Register(t), production.Register(t)
			a, b := provisioned(t, staging, alice), provisioned(t, production, bob)
			require.Equal(t, a.ID, b.ID, "both deployments number their first account alike")

			assert.NotEqual(t, a.ExternalAccountID, b.ExternalAccountID, "bob has an account of his own")
			assert.NotEqual(t, a.URL, b.URL)
			assert.Equal(t, 2, c.Creates(), "one account per user at the cell")
			posts := c.Posts()
			require.Len(t, posts, 2)
			assert.Equal(t, keyOf(t, staging, a.ID), posts[0].Key)
			assert.Equal(t, keyOf(t, production, b.ID), posts[1].Key)
			assert.NotEqual(t, posts[0].Key, posts[1].Key, "each account has a key of its own")
			assert.Equal(t, c.AccountOf(posts[1].Key), b.ExternalAccountID)
		})
	}
}

// TestACrashRetriesWithTheStoredKeyBesideAnotherDeployment: beside a deployment whose first
// account is Active, another one crashes twice: once after its call reached the cell (the answer
// lost), once between storing an intent and calling. Restarted on the same control database, it
// finishes both with the keys stored with them: one account per user at the cell, never the
// other deployment's.
func TestACrashRetriesWithTheStoredKeyBesideAnotherDeployment(t *testing.T) {
	c := newCell(t)
	c.SetEcho(true)
	staging := deployment(t, c, testutil.FreshDatabase(t, "wfauto_crash_a"))
	alice := staging.Register(t)
	first := provisioned(t, staging, alice)

	url := testutil.FreshDatabase(t, "wfauto_crash_b")
	production := deployment(t, c, url)
	bob, carol := production.Register(t), production.Register(t)
	c.SetHang(1500 * time.Millisecond)
	c.SetMode(wfautotest.Hang) // the cell makes bob's account; its answer never arrives in time
	r := production.Post("/api/me/wfauto/provision", bob.Token, nil)
	c.SetMode(wfautotest.OK)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var lost account
	r.Decode(t, &lost)
	require.Equal(t, "Pending", lost.Status)
	time.Sleep(600 * time.Millisecond) // the hung handler finishes on the cell's side
	bobKey := keyOf(t, production, lost.ID)
	require.True(t, c.Held(bobKey))
	// Carol's intent, stored by a request that died before calling the cell.
	var carolID int64
	require.NoError(t, production.DB.QueryRow("INSERT INTO wfauto_accounts (user_id, status) VALUES (?, 'Pending') RETURNING id",
		carol.ID).Scan(&carolID))
	carolKey := keyOf(t, production, carolID)
	require.Regexp(t, uuidRe, carolKey, "the key is made with the intent")
	production.Stop()

	restarted := deployment(t, c, url)
	_, err := restarted.DB.Exec("UPDATE wfauto_accounts SET next_attempt_at = now() WHERE status = 'Pending'")
	require.NoError(t, err)
	restarted.Settle(5 * time.Second)

	b, cl := accountOf(t, restarted, bob), accountOf(t, restarted, carol)
	require.Equal(t, "Active", b.Status)
	require.Equal(t, "Active", cl.Status)
	assert.Equal(t, c.AccountOf(bobKey), b.ExternalAccountID, "the account the lost call made")
	assert.Equal(t, c.AccountOf(carolKey), cl.ExternalAccountID)
	assert.NotEqual(t, first.ExternalAccountID, b.ExternalAccountID)
	assert.NotEqual(t, first.ExternalAccountID, cl.ExternalAccountID)
	assert.Equal(t, 3, c.Creates(), "one account per user at the cell")
	keys := map[string]int{}
	for _, p := range c.Posts() {
		keys[p.Key]++
	}
	assert.Equal(t, 2, keys[bobKey], "the retry sent bob's key again")
	assert.Equal(t, 1, keys[carolKey], "carol's stored key, sent once")
	assert.Equal(t, bobKey, keyOf(t, restarted, lost.ID), "kept")
}

// TestAnAnswerForAnotherUserIsRefused: a row keyed like another deployment's (as two rows keyed by
// their local ids before keys were random are) is answered by the cell with that deployment's
// account, which the cell echoes the email of. It is refused: Failed, nothing stored, the row
// given a fresh key, so provisioning again makes the user's own account; deleting the user never
// deletes the other deployment's account.
func TestAnAnswerForAnotherUserIsRefused(t *testing.T) {
	c := newCell(t)
	c.SetEcho(true)
	staging := deployment(t, c, testutil.FreshDatabase(t, "wfauto_other_a"))
	production := deployment(t, c, testutil.FreshDatabase(t, "wfauto_other_b"))
	alice := staging.Register(t)
	first := provisioned(t, staging, alice)
	aliceKey := keyOf(t, staging, first.ID)

	// bob's create failed (500, nothing made); his row is then keyed like alice's.
	pending := func(t *testing.T, u apptest.User) account {
		c.SetMode(wfautotest.Fail500)
		r := production.Post("/api/me/wfauto/provision", u.Token, nil)
		c.SetMode(wfautotest.OK)
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		var acc account
		r.Decode(t, &acc)
		require.Equal(t, "Pending", acc.Status)
		_, err := production.DB.Exec("UPDATE wfauto_accounts SET idempotency_key = ?, next_attempt_at = now() WHERE id = ?", aliceKey, acc.ID)
		require.NoError(t, err)
		return acc
	}

	t.Run("provisioning", func(t *testing.T) {
		bob := production.Register(t)
		acc := pending(t, bob)
		production.Settle(5 * time.Second)
		got := accountOf(t, production, bob)
		assert.Equal(t, "Failed", got.Status, "never Active with alice's account")
		assert.Empty(t, got.ExternalAccountID)
		assert.Empty(t, got.URL)
		assert.Contains(t, got.ErrorMessage, "made for another user")
		assert.NotContains(t, got.ErrorMessage, alice.Email)
		assert.NotEqual(t, aliceKey, keyOf(t, production, acc.ID), "a fresh key")
		var audited int
		require.NoError(t, production.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'wfauto.failed' AND target_id = ?",
			fmt.Sprint(acc.ID)).Scan(&audited))
		assert.Equal(t, 1, audited)

		again := provisioned(t, production, bob)
		assert.Equal(t, acc.ID, again.ID)
		assert.NotEqual(t, first.ExternalAccountID, again.ExternalAccountID, "bob's own account")
		assert.Equal(t, "Active", accountOf(t, staging, alice).Status)
	})

	t.Run("deprovisioning", func(t *testing.T) {
		admin := production.AdminToken(t)
		carol := production.Register(t)
		acc := pending(t, carol)
		r := production.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", carol.ID), Token: admin})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		production.Settle(5 * time.Second)
		var status, left string
		require.NoError(t, production.DB.QueryRow("SELECT status FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&status))
		assert.Equal(t, "Deprovisioned", status)
		require.NoError(t, production.DB.QueryRow("SELECT details->>'leftAtCell' FROM audit_events "+
			"WHERE action = 'wfauto.deprovisioned' AND target_id = ?", fmt.Sprint(acc.ID)).Scan(&left))
		assert.Equal(t, "made for another user", left)
		assert.True(t, c.Held(aliceKey), "alice's account is still at the cell")
		assert.NotContains(t, c.Deleted(), first.ExternalAccountID)
	})
}

// TestTheKeyMigrationKeepsTheKeyTheCellSaw: rows stored before keys were random sent their id as
// the key. The migration keeps it for the rows whose create may have reached the cell, whose
// retry then gets the account the cell made under it; the others get a random key.
func TestTheKeyMigrationKeepsTheKeyTheCellSaw(t *testing.T) {
	c := newCell(t)
	url := testutil.FreshDatabase(t, "wfauto_key_migration")
	before := deployment(t, c, url)
	ada, bea, cy := before.Register(t), before.Register(t), before.Register(t)
	// The table as it was before the migration, which is pending again.
	_, err := before.DB.Exec("ALTER TABLE wfauto_accounts DROP COLUMN idempotency_key")
	require.NoError(t, err)
	_, err = before.DB.Exec("DELETE FROM bun_migrations WHERE name = '20261126003700'")
	require.NoError(t, err)
	// ada's create reached the cell (keyed by the row's id) and its answer was lost; bea's was
	// refused (so recorded as not at the cell); cy's intent was stored, nothing sent.
	row := func(u apptest.User, status string) int64 {
		var id int64
		require.NoError(t, before.DB.QueryRow("INSERT INTO wfauto_accounts (user_id, status) VALUES (?, ?) RETURNING id", u.ID, status).Scan(&id))
		return id
	}
	adaID, beaID, cyID := row(ada, "Pending"), row(bea, "Failed"), row(cy, "Pending")
	body := cell.Request{UserID: ada.ID, Email: ada.Email, FullName: "Test User", Organization: "Tests"}.JSON()
	_, err = before.DB.Exec("INSERT INTO wfauto_cell_creates (account_id, request) VALUES (?, ?)", adaID, string(body))
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, c.URL+"/accounts", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+cellKey)
	req.Header.Set("Idempotency-Key", fmt.Sprint(adaID))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusCreated, res.StatusCode)
	made := c.AccountOf(fmt.Sprint(adaID))
	before.Stop()

	after := deployment(t, c, url) // applies the pending migration
	assert.Equal(t, fmt.Sprint(adaID), keyOf(t, after, adaID), "may have reached the cell: its id, the key the cell saw")
	assert.Regexp(t, uuidRe, keyOf(t, after, beaID), "refused: a fresh key")
	assert.Regexp(t, uuidRe, keyOf(t, after, cyID), "never sent: a fresh key")
	_, err = after.DB.Exec("UPDATE wfauto_accounts SET next_attempt_at = now() WHERE status = 'Pending'")
	require.NoError(t, err)
	after.Settle(5 * time.Second)
	got := accountOf(t, after, ada)
	assert.Equal(t, "Active", got.Status)
	assert.Equal(t, made, got.ExternalAccountID, "the account the cell made under the old key")
	assert.Equal(t, "Active", accountOf(t, after, cy).Status)
	assert.Equal(t, 2, c.Creates(), "ada's and cy's: none made twice")
	r := after.Post("/api/me/wfauto/provision", bea.Token, nil)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	assert.Equal(t, keyOf(t, after, beaID), c.Posts()[len(c.Posts())-1].Key, "bea's retry sends her fresh key")
}
