package wfauto_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/wfauto/wfautotest"
)

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
		r, acc := provisionWhile(t, a, c, wfautotest.Refuse400, u.Token)
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
