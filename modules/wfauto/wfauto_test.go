package wfauto_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
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
			c.SetMode(tc.mode)
			r := a.Post("/api/me/wfauto/provision", u.Token, nil)
			c.SetMode(wfautotest.OK)
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			var acc account
			r.Decode(t, &acc)
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
	c.SetMode(wfautotest.Hang) // the cell makes the account but the answer never arrives in time
	r := a.Post("/api/me/wfauto/provision", u.Token, nil)
	c.SetMode(wfautotest.OK)
	require.Equal(t, http.StatusBadGateway, r.Status)
	var acc account
	r.Decode(t, &acc)
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
			c.SetMode(mode)
			r := a.Post("/api/me/wfauto/provision", u.Token, nil)
			c.SetMode(wfautotest.OK)
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			var acc account
			r.Decode(t, &acc)
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
	c.SetMode(wfautotest.Hang) // the cell makes the account; its answer never arrives in time
	r := a.Post("/api/me/wfauto/provision", u.Token, nil)
	c.SetMode(wfautotest.OK)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)
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

// pauser holds the first query of the app that matches, until the test releases it: a point
// between two steps of a request where the test does something else (no sleeps).
type pauser struct {
	mu               sync.Mutex
	match            func(query string) bool
	reached, release chan struct{}
}

// arm makes the next query matching match wait; reached is closed when one does, and it goes on
// once release is closed.
func (p *pauser) arm(match func(query string) bool) (reached, release chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.match, p.reached, p.release = match, make(chan struct{}), make(chan struct{})
	return p.reached, p.release
}

func (p *pauser) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	p.mu.Lock()
	if p.match == nil || !p.match(e.Query) {
		p.mu.Unlock()
		return ctx
	}
	p.match = nil
	reached, release := p.reached, p.release
	p.mu.Unlock()
	close(reached)
	<-release
	return ctx
}

func (p *pauser) AfterQuery(context.Context, *bun.QueryEvent) {}

// TestProvisionForAUserDeletedMeanwhile: the user is deleted while a provision request is in
// flight. Deleted after the account was stored but before it was sent, the cell is never called;
// deleted after the cell made it, the finisher deletes it there. Either way the answer is that of
// a missing user (an admin's 404 "User not found", the user's own 401), never a 502 about a cell
// that was fine.
func TestProvisionForAUserDeletedMeanwhile(t *testing.T) {
	c := newCell(t)
	p := &pauser{}
	a := apptest.Start(t, apptest.With(map[string]any{"WfautoProvisioning:BaseUrl": c.URL, "WfautoProvisioning:ApiKey": cellKey,
		"WfautoProvisioning:TimeoutSeconds": 1, "RateLimit:Register": "1000-M"}),
		apptest.WithFx(fx.Decorate(func(db *bun.DB) *bun.DB { db.AddQueryHook(p); return db })))
	t.Cleanup(func() { _, _ = a.DB.Exec("UPDATE wfauto_accounts SET status = 'Failed' WHERE status = 'Pending'") })
	admin := a.AdminToken(t)
	// The request's own attempt claims the stored account: after the intent, before the cell.
	claim := func(q string) bool {
		return strings.Contains(q, `FROM "wfauto_accounts" WHERE (status IN (`) && strings.HasSuffix(q, "FOR UPDATE")
	}
	calls := func() (calls, creates int) { return c.Calls(), c.Creates() }
	for _, tc := range []struct {
		name, when string
		own        bool
		status     int
		message    string
	}{
		{"admin, before the call", "before", false, http.StatusNotFound, "User not found"},
		{"admin, after the call", "after", false, http.StatusNotFound, "User not found"},
		{"own, before the call", "before", true, http.StatusUnauthorized, "Invalid or expired token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := a.Register(t)
			calls0, creates0 := calls()
			var reached, release chan struct{}
			if tc.when == "before" {
				reached, release = p.arm(claim)
			} else {
				// The request reads the account back once the cell made it and the outcome is recorded
				// (the attempt's own read of the row comes before the call).
				reached, release = p.arm(func(q string) bool {
					_, creates := calls()
					return creates > creates0 && strings.Contains(q, `FROM "wfauto_accounts" AS "w" WHERE (id = `)
				})
			}
			done := make(chan *apptest.Resp, 1)
			go func() {
				if tc.own {
					done <- a.Post("/api/me/wfauto/provision", u.Token, nil)
				} else {
					done <- a.Post("/api/wfauto/accounts", admin, map[string]any{"userId": u.ID})
				}
			}()
			<-reached
			r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
			close(release)
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			r = <-done
			assert.Equal(t, tc.status, r.Status, string(r.Raw))
			assert.Equal(t, tc.message, r.Env.Message)

			a.Settle(5 * time.Second)
			var id int64
			var status string
			require.NoError(t, a.DB.QueryRow("SELECT id, status FROM wfauto_accounts WHERE user_id = ?", u.ID).Scan(&id, &status))
			assert.Equal(t, "Deprovisioned", status)
			assert.False(t, c.Held(keyOf(t, a, id)), "nothing left at the cell")
			n, creates := calls()
			if tc.when == "before" {
				assert.Equal(t, calls0, n, "the cell is never called for an account it never got")
				assert.Equal(t, creates0, creates)
			}
		})
	}
}

// TestDeprovisionSkipsTheCellForAnAccountItNeverGot: a Failed account whose only create the cell
// refused (a 4xx), or that never left (the cell unreachable), is not at the cell. Deleting its
// owner deprovisions it without calling the cell, which has no lookup: re-posting the
// Idempotency-Key to learn the account's id would make it there only to delete it (or, with the
// cell still down, keep it Deprovisioning until the cell is back).
func TestDeprovisionSkipsTheCellForAnAccountItNeverGot(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		a, c := setup(t)
		admin := a.AdminToken(t)
		u := a.Register(t)
		c.SetMode(wfautotest.Refuse400)
		r := a.Post("/api/me/wfauto/provision", u.Token, nil)
		c.SetMode(wfautotest.OK)
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		var acc account
		r.Decode(t, &acc)
		require.Equal(t, "Failed", acc.Status)
		calls := c.Calls()

		r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		a.Settle(5 * time.Second)
		var status string
		require.NoError(t, a.DB.QueryRow("SELECT status FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&status))
		assert.Equal(t, "Deprovisioned", status)
		assert.Equal(t, calls, c.Calls(), "the cell is not called")
		assert.Zero(t, c.Creates(), "no account made at the cell")
	})
	t.Run("unreachable", func(t *testing.T) {
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close() // connections to it are refused
		a := apptest.Start(t, apptest.With(map[string]any{"WfautoProvisioning:BaseUrl": down.URL, "WfautoProvisioning:ApiKey": cellKey,
			"WfautoProvisioning:TimeoutSeconds": 1, "RateLimit:Register": "1000-M", "Finisher:MaxAttempts": 1}))
		admin := a.AdminToken(t)
		u := a.Register(t)
		r := a.Post("/api/me/wfauto/provision", u.Token, nil)
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		var acc account
		r.Decode(t, &acc)
		require.Equal(t, "Failed", acc.Status, "attempts ran out (Finisher:MaxAttempts 1)")
		assert.Contains(t, acc.ErrorMessage, "unreachable")

		r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		a.Settle(5 * time.Second)
		var status, lastError string
		require.NoError(t, a.DB.QueryRow("SELECT status, last_error FROM wfauto_accounts WHERE id = ?", acc.ID).Scan(&status, &lastError))
		assert.Equal(t, "Deprovisioned", status, "not left Deprovisioning against a cell that never got it (%s)", lastError)
	})
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
			c.SetMode(mode)
			r := a.Post("/api/me/wfauto/provision", u.Token, nil)
			c.SetMode(wfautotest.OK)
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			var acc account
			r.Decode(t, &acc)
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
	c.SetMode(wfautotest.Hang)
	r := a.Post("/api/me/wfauto/provision", u.Token, nil)
	c.SetMode(wfautotest.OK)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var acc account
	r.Decode(t, &acc)
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
		c.SetMode(wfautotest.Garbage)
		r := a.Post("/api/me/wfauto/provision", u.Token, nil)
		c.SetMode(wfautotest.OK)
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		var acc account
		r.Decode(t, &acc)
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
		c.SetMode(wfautotest.Garbage)
		r := a.Post("/api/me/wfauto/provision", u.Token, nil)
		c.SetMode(wfautotest.OK)
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		var acc account
		r.Decode(t, &acc)
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
