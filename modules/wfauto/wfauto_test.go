package wfauto_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/wfauto"
	"provisioner/modules/wfauto/wfautotest"
	"provisioner/platform/provision/provisiontest"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const cellKey = "cell-secret-key"

// newCell starts a fake cell expecting cellKey, closed when the test ends.
func newCell(t *testing.T) *wfautotest.Cell {
	c := wfautotest.New(cellKey)
	t.Cleanup(c.Close)
	return c
}

// uuidRe matches a random (version 4) UUID.
const uuidRe = `^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`

// keyOf is the Idempotency-Key stored with account id.
func keyOf(t *testing.T, a *apptest.App, id int64) string {
	t.Helper()
	var key string
	require.NoError(t, a.DB.QueryRow("SELECT idempotency_key FROM wfauto_accounts WHERE id = ?", id).Scan(&key))
	return key
}

type account struct {
	ID                int64  `json:"id"`
	Status            string `json:"status"`
	ExternalAccountID string `json:"externalAccountId"`
	URL               string `json:"url"`
	ErrorMessage      string `json:"errorMessage"`
}

// provisionWhile asks for the account of token's user while the cell answers in mode, then puts
// the cell back to OK; the answer must be a 502, returned with the account it carries.
func provisionWhile(t *testing.T, a *apptest.App, c *wfautotest.Cell, mode wfautotest.Mode, token string) (*apptest.Resp, account) {
	t.Helper()
	c.SetMode(mode)
	r := a.Post("/api/me/wfauto/provision", token, nil)
	c.SetMode(wfautotest.OK)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)
	return r, acc
}

func setup(t *testing.T) (*apptest.App, *wfautotest.Cell) {
	c := newCell(t)
	a := apptest.Start(t, apptest.With(map[string]any{"WfautoProvisioning:BaseUrl": c.URL, "WfautoProvisioning:ApiKey": cellKey,
		"WfautoProvisioning:TimeoutSeconds": 1, "RateLimit:Register": "1000-M"}))
	t.Cleanup(func() { _, _ = a.DB.Exec("UPDATE wfauto_accounts SET status = 'Failed' WHERE status = 'Pending'") })
	return a, c
}

func TestProvisionOnePerUser(t *testing.T) {
	a, c := setup(t)
	u := a.Register(t)
	r := a.Post("/api/me/wfauto/provision", u.Token, nil)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)
	assert.Equal(t, "Active", acc.Status)
	made := c.AccountOf(keyOf(t, a, acc.ID))
	assert.NotEmpty(t, made)
	assert.Equal(t, made, acc.ExternalAccountID)
	assert.Equal(t, "https://flows.example.test/"+made, acc.URL)
	posts := c.Posts()
	require.Len(t, posts, 1)
	assert.Equal(t, keyOf(t, a, acc.ID), posts[0].Key, "Idempotency-Key is the key stored with the account")
	assert.Regexp(t, uuidRe, posts[0].Key, "a random UUID, not the local account id")
	assert.Equal(t, u.Email, posts[0].Body["email"])
	assert.EqualValues(t, u.ID, posts[0].Body["userId"])
	assert.Equal(t, "Test User", posts[0].Body["fullName"])
	assert.Equal(t, "Tests", posts[0].Body["organization"])

	assert.Equal(t, http.StatusConflict, a.Post("/api/me/wfauto/provision", u.Token, map[string]any{}).Status)
	var list []account
	a.Get("/api/me/wfauto", u.Token).Decode(t, &list)
	assert.Len(t, list, 1)
	assert.NotContains(t, string(a.Get("/api/me/wfauto", u.Token).Raw), cellKey)
}

func TestCellFailures(t *testing.T) {
	a, c := setup(t)
	cases := []struct {
		mode             wfautotest.Mode
		status, contains string
	}{
		{wfautotest.Refuse400, "Failed", "organization not allowed"},
		// A reason code is words joined by '_', not a token: it reaches the user.
		{wfautotest.RefuseCode, "Failed", "organization_not_allowed ask the cell's operator"},
		{wfautotest.Garbage, "Pending", "malformed"},
		{wfautotest.MissingURL, "Pending", "malformed"},
		{wfautotest.Fail500, "Pending", "database is down"},
		{wfautotest.Hang, "Pending", "timed out"},
	}
	c.SetHang(1500 * time.Millisecond)
	for _, tc := range cases {
		t.Run(string(tc.mode), func(t *testing.T) {
			u := a.Register(t)
			r, acc := provisionWhile(t, a, c, tc.mode, u.Token)
			assert.Equal(t, tc.status, acc.Status)
			assert.Contains(t, acc.ErrorMessage, tc.contains)
			assert.NotContains(t, string(r.Raw), cellKey)

			// Provisioning again after a failure retries the same account (same key).
			if tc.status == "Failed" {
				r = a.Post("/api/me/wfauto/provision", u.Token, nil)
				require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
				var again account
				r.Decode(t, &again)
				assert.Equal(t, acc.ID, again.ID)
				assert.Equal(t, "Active", again.Status)
			} else {
				assert.Equal(t, http.StatusConflict, a.Post("/api/me/wfauto/provision", u.Token, nil).Status, "still Pending")
			}
		})
	}
}

// TestCrashIsFinishedOnceWithTheSameKey: an account left Pending (a crash between the intent and
// the call, or after a call whose answer was lost) is finished by the finisher with the same
// Idempotency-Key, so the cell creates one account only.
func TestCrashIsFinishedOnceWithTheSameKey(t *testing.T) {
	a, c := setup(t)
	u := a.Register(t)
	c.SetHang(1500 * time.Millisecond)
	// the cell makes the account but the answer never arrives in time
	_, acc := provisionWhile(t, a, c, wfautotest.Hang, u.Token)
	require.Equal(t, "Pending", acc.Status)
	time.Sleep(600 * time.Millisecond) // the hung handler finishes on the cell's side

	// A row left by a crash before the call.
	v := a.Register(t)
	_, err := a.DB.Exec("INSERT INTO wfauto_accounts (user_id, status) VALUES (?, 'Pending')", v.ID)
	require.NoError(t, err)

	_, err = a.DB.Exec("UPDATE wfauto_accounts SET next_attempt_at = now() WHERE status = 'Pending'")
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	a.Settle(time.Second)

	var list []account
	a.Get("/api/me/wfauto", u.Token).Decode(t, &list)
	require.Len(t, list, 1)
	assert.Equal(t, "Active", list[0].Status)
	a.Get("/api/me/wfauto", v.Token).Decode(t, &list)
	require.Len(t, list, 1)
	assert.Equal(t, "Active", list[0].Status)

	assert.Equal(t, 2, c.Creates(), "one account per user at the cell")
	keys := map[string]int{}
	for _, p := range c.Posts() {
		keys[p.Key]++
	}
	assert.Equal(t, 2, keys[keyOf(t, a, acc.ID)], "the retry reused the Idempotency-Key")
}

func TestDeprovisionOnUserDeletionAndAdminRoutes(t *testing.T) {
	a, c := setup(t)
	admin := a.AdminToken(t)
	u := a.Register(t)
	r := a.Post("/api/wfauto/accounts", admin, map[string]any{"userId": u.ID})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)

	r = a.Get(fmt.Sprintf("/api/wfauto/accounts?userId=%d", u.ID), admin)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Contains(t, string(r.Raw), `"totalCount":1`)
	assert.Equal(t, http.StatusOK, a.Get(fmt.Sprintf("/api/wfauto/accounts/%d", acc.ID), admin).Status)
	r = a.Post(fmt.Sprintf("/api/wfauto/accounts/%d/retry", acc.ID), admin, nil)
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "Nothing to retry: the account is Active", r.Env.Message, "not \"A Active account\"")

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status)
	a.Settle(5 * time.Second)
	assert.Contains(t, c.Deleted(), acc.ExternalAccountID)
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&status))
	assert.Equal(t, "Deprovisioned", status)

	// Audited as the other modules audit what a deleted user released: the deleting admin as
	// actor, details.reason user.deleted.
	var deleter int64
	require.NoError(t, a.DB.QueryRow("SELECT actor_user_id FROM audit_events WHERE action = 'user.deleted' AND user_id = ?", u.ID).Scan(&deleter))
	var actor *int64
	var reason, external string
	require.NoError(t, a.DB.QueryRow("SELECT actor_user_id, details->>'reason', details->>'externalAccountId' FROM audit_events "+
		"WHERE action = 'wfauto.deprovisioned' AND target_id = ?", fmt.Sprint(acc.ID)).Scan(&actor, &reason, &external))
	require.NotNil(t, actor, "the deleting admin is the actor")
	assert.Equal(t, deleter, *actor)
	assert.Equal(t, "user.deleted", reason)
	assert.Equal(t, acc.ExternalAccountID, external)
}

func TestNotConfigured(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	r := a.Post("/api/me/wfauto/provision", u.Token, nil)
	assert.Equal(t, http.StatusServiceUnavailable, r.Status)
	assert.Equal(t, http.StatusOK, a.Get("/api/me/wfauto", u.Token).Status)
}

// TestProvisionerSuite runs the suite every provisioner passes.
func TestProvisionerSuite(t *testing.T) {
	c := newCell(t)
	var prov *wfauto.Provisioner
	a := apptest.Start(t, apptest.With(map[string]any{"WfautoProvisioning:BaseUrl": c.URL, "WfautoProvisioning:ApiKey": cellKey,
		"RateLimit:Register": "1000-M"}), apptest.WithFx(fx.Populate(&prov)))
	status := func(t *testing.T, id int64) string {
		var s string
		require.NoError(t, a.DB.QueryRow("SELECT status FROM wfauto_accounts WHERE id = ?", id).Scan(&s))
		return s
	}
	provisiontest.Run(t, provisiontest.Harness{
		DB: a.DB, Provisioner: prov, Created: "Active", Deleted: "Deprovisioned", Status: status,
		NewRow: func(t *testing.T) int64 {
			u := a.Register(t)
			var id int64
			require.NoError(t, a.DB.QueryRow("INSERT INTO wfauto_accounts (user_id, status) VALUES (?, 'Pending') RETURNING id", u.ID).Scan(&id))
			return id
		},
		MarkDeleting: func(t *testing.T, id int64) {
			_, err := a.DB.Exec("UPDATE wfauto_accounts SET status = 'Deprovisioning' WHERE id = ?", id)
			require.NoError(t, err)
		},
		External: func(t *testing.T, id int64) int {
			if c.Held(keyOf(t, a, id)) {
				return 1
			}
			return 0
		},
	})
}

// TestCellErrorNeverQuotesItsKey: a cell error body quoting the API key (or other token-like
// strings) is stored sanitised and bounded: the user-visible error and the stored last error (the
// text the finisher logs) never contain it.
func TestCellErrorNeverQuotesItsKey(t *testing.T) {
	a, c := setup(t)
	for _, mode := range []wfautotest.Mode{wfautotest.Leak, wfautotest.LeakHTML} {
		t.Run(string(mode), func(t *testing.T) {
			u := a.Register(t)
			r, acc := provisionWhile(t, a, c, mode, u.Token)
			assert.Equal(t, "Pending", acc.Status)
			assert.NotEmpty(t, acc.ErrorMessage)
			assert.Contains(t, acc.ErrorMessage, "answered 50")
			list := a.Get("/api/me/wfauto", u.Token)
			var stored struct{ ErrorMessage, LastError string }
			require.NoError(t, a.DB.QueryRow("SELECT error_message, last_error FROM wfauto_accounts WHERE id = ?", acc.ID).
				Scan(&stored.ErrorMessage, &stored.LastError))
			for _, text := range []string{string(r.Raw), string(list.Raw), stored.ErrorMessage, stored.LastError} {
				assert.NotContains(t, text, cellKey)
				assert.NotContains(t, text, "sk_live_9f8e7d6c5b4a39281706f5e4d3c2b1a0")
				assert.NotContains(t, text, "<html>")
			}
			assert.LessOrEqual(t, len(stored.LastError), 300, "bounded")
		})
	}
}

// TestDeletingAUserDeprovisionsTheirFailedAccountAtTheCell: the account's create reached the cell
// but timed out, and attempts ran out (Failed). Deleting the user deprovisions it at the cell
// (through Deprovisioning and the finisher) before it is Deprovisioned.
func TestDeletingAUserDeprovisionsTheirFailedAccountAtTheCell(t *testing.T) {
	c := newCell(t)
	a := apptest.Start(t, apptest.With(map[string]any{"WfautoProvisioning:BaseUrl": c.URL, "WfautoProvisioning:ApiKey": cellKey,
		"WfautoProvisioning:TimeoutSeconds": 1, "RateLimit:Register": "1000-M", "Finisher:MaxAttempts": 1}))
	t.Cleanup(func() { _, _ = a.DB.Exec("UPDATE wfauto_accounts SET status = 'Failed' WHERE status = 'Pending'") })
	admin := a.AdminToken(t)
	u := a.Register(t)
	c.SetHang(1500 * time.Millisecond)
	// the cell makes the account; its answer never arrives in time
	r, acc := provisionWhile(t, a, c, wfautotest.Hang, u.Token)
	require.Equal(t, "Failed", acc.Status, "attempts ran out (Finisher:MaxAttempts 1)")
	time.Sleep(600 * time.Millisecond) // the hung handler finishes on the cell's side
	require.True(t, c.Held(keyOf(t, a, acc.ID)), "the cell holds the account")

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Settle(5 * time.Second)
	assert.False(t, c.Held(keyOf(t, a, acc.ID)), "deprovisioned at the cell")
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&status))
	assert.Equal(t, "Deprovisioned", status)
	assert.Equal(t, 1, c.Creates(), "no second account made")
}

// TestCellRetryAfterHoldsTheFinisherBack: a cell answering 429 or 503 with Retry-After (seconds or
// an HTTP-date) ends the attempt at once; the answer is 502 with the account Pending and a
// Retry-After of the cell's wait, and the finisher does not call the cell again before it (its
// own first backoff is ~1 s). Once the wait is over, the finisher provisions the account.
func TestCellRetryAfterHoldsTheFinisherBack(t *testing.T) {
	a, c := setup(t)
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter func() string
	}{
		{"429 seconds", http.StatusTooManyRequests, func() string { return "120" }},
		{"503 date", http.StatusServiceUnavailable, func() string { return time.Now().Add(121 * time.Second).UTC().Format(http.TimeFormat) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := a.Register(t)
			c.SetThrottle(tc.status, tc.retryAfter())
			before := time.Now()
			r := a.Post("/api/me/wfauto/provision", u.Token, nil)
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			assert.Less(t, time.Since(before), 10*time.Second, "the request does not sit out the Retry-After")
			var acc account
			r.Decode(t, &acc)
			assert.Equal(t, "Pending", acc.Status)
			assert.Contains(t, acc.ErrorMessage, fmt.Sprint(tc.status))
			wait, err := strconv.Atoi(r.Header.Get("Retry-After"))
			require.NoError(t, err, "Retry-After: %q", r.Header.Get("Retry-After"))
			assert.GreaterOrEqual(t, wait, 119, "the client is told when the background attempt is due")
			assert.LessOrEqual(t, wait, 122)

			var next time.Time
			require.NoError(t, a.DB.QueryRow("SELECT next_attempt_at FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&next))
			assert.False(t, next.Before(before.Add(119*time.Second)), "next attempt in %s, sooner than the cell's Retry-After", next.Sub(before))
			calls := c.Calls()
			time.Sleep(1500 * time.Millisecond) // past the first plain backoff (~1 s)
			a.Settle(2 * time.Second)
			assert.Equal(t, calls, c.Calls(), "no call to the cell before its wait is over")
			c.SetMode(wfautotest.OK)

			// Once the wait is over, the finisher provisions it.
			_, err = a.DB.Exec("UPDATE wfauto_accounts SET next_attempt_at = now() WHERE id = ?", acc.ID)
			require.NoError(t, err)
			a.Settle(5 * time.Second)
			var list []account
			a.Get("/api/me/wfauto", u.Token).Decode(t, &list)
			require.Len(t, list, 1)
			assert.Equal(t, "Active", list[0].Status)
			assert.Empty(t, list[0].ErrorMessage)
			assert.True(t, c.Held(keyOf(t, a, acc.ID)))
		})
	}
}

// TestOpenAPIDocumentsTheRetryAfterOfA502: every operation that calls the cell documents the
// Retry-After of its 502 (huma generates error responses without headers).
func TestOpenAPIDocumentsTheRetryAfterOfA502(t *testing.T) {
	a := apptest.Start(t)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Description string                     `json:"description"`
				Headers     map[string]json.RawMessage `json:"headers"`
				Content     map[string]json.RawMessage `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.NoError(t, json.Unmarshal(testutil.InlineOpenAPI(t, r.Raw), &doc))
	for _, path := range []string{"/api/me/wfauto/provision", "/api/wfauto/accounts", "/api/wfauto/accounts/{id}/retry"} {
		res, ok := doc.Paths[path]["post"].Responses["502"]
		require.True(t, ok, "POST %s documents 502", path)
		assert.Contains(t, res.Headers, "Retry-After", "POST %s", path)
		assert.Contains(t, res.Description, "rate limiting", "POST %s", path)
		assert.Contains(t, res.Content, "application/json", "POST %s: the envelope is still documented", path)
	}
}

// TestAnAnswerWithControlCharactersOrUnboundedIsMalformed: a cell answering 201 with a NUL (which
// PostgreSQL cannot store), another control character, or an unbounded length in accountId or url
// gets the same treatment as any malformed answer: final, the account Failed with the error, one
// call to the cell. (A NUL made the finisher's transaction fail, so the attempt was never recorded
// and the cell was posted to again at every poll, without backoff.) The stored account was due in
// a minute, not at 0001-01-01.
func TestAnAnswerWithControlCharactersOrUnboundedIsMalformed(t *testing.T) {
	a, c := setup(t)
	admin := a.AdminToken(t)
	for _, mode := range []wfautotest.Mode{wfautotest.NulID, wfautotest.NewlineID, wfautotest.C1URL, wfautotest.LongID, wfautotest.LongURL} {
		t.Run(string(mode), func(t *testing.T) {
			u := a.Register(t)
			r, acc := provisionWhile(t, a, c, mode, u.Token)
			assert.Equal(t, "Pending", acc.Status, "the cell may hold the account: retried with the same key")
			assert.Contains(t, acc.ErrorMessage, "malformed answer")
			assert.NotEmpty(t, r.Header.Get("Retry-After"))
			var external string
			require.NoError(t, a.DB.QueryRow("SELECT external_account_id FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&external))
			assert.Empty(t, external, "nothing of the bad answer stored")

			// The retry (same Idempotency-Key) gets the cell's account, made once.
			r = a.Post(fmt.Sprintf("/api/wfauto/accounts/%d/retry", acc.ID), admin, nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			r.Decode(t, &acc)
			assert.Equal(t, "Active", acc.Status)
			assert.Equal(t, c.AccountOf(keyOf(t, a, acc.ID)), acc.ExternalAccountID)
		})
	}
	t.Run("refused: next_attempt_at as stored", func(t *testing.T) {
		u := a.Register(t)
		before := time.Now()
		c.SetMode(wfautotest.Refuse400)
		r := a.Post("/api/me/wfauto/provision", u.Token, nil)
		c.SetMode(wfautotest.OK)
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		var next time.Time
		require.NoError(t, a.DB.QueryRow("SELECT next_attempt_at FROM wfauto_accounts WHERE user_id = ?", u.ID).Scan(&next))
		assert.True(t, next.After(before), "stored due in a minute, not %s", next)
	})
}

// TestAnErrorOfOursIsNotShown: an attempt that fails on our side (here the database refuses to
// record the account Active) is retried like any other, but its errorMessage is a generic text:
// the database's words (the statement, SQLSTATE) are only logged. The retry, with the same
// Idempotency-Key, gets the account the cell made.
func TestAnErrorOfOursIsNotShown(t *testing.T) {
	a, c := setup(t)
	admin := a.AdminToken(t)
	u := a.Register(t)
	drop := testutil.RefuseUpdates(t, a.DB, "wfauto_accounts", fmt.Sprintf("NEW.status = 'Active' AND NEW.user_id = %d", u.ID))

	r := a.Post("/api/me/wfauto/provision", u.Token, nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)
	assert.Equal(t, "Pending", acc.Status)
	assert.Equal(t, wfauto.MsgInternal, acc.ErrorMessage)
	assert.NotContains(t, string(r.Raw), "secret_table")
	assert.NotContains(t, string(r.Raw), "SQLSTATE")

	drop()
	r = a.Post(fmt.Sprintf("/api/wfauto/accounts/%d/retry", acc.ID), admin, nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &acc)
	assert.Equal(t, "Active", acc.Status)
	assert.Equal(t, 1, c.Creates())
}
