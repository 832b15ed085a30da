package admin_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// signIn creates an account with role through the API and returns its id and a token.
func signIn(t *testing.T, a *apptest.App, admin, role string) (int64, string) {
	t.Helper()
	email := "inflight-" + testutil.RandomSuffix() + "@corp.test"
	r := a.Post("/api/users", admin, map[string]any{"fullName": "In Flight", "email": email,
		"password": "long-enough-password-42", "role": role})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var u struct{ ID int64 }
	r.Decode(t, &u)
	r = a.Post("/api/auth/login", "", map[string]any{"email": email, "password": "long-enough-password-42"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var tok struct {
		AccessToken string `json:"accessToken"`
	}
	r.Decode(t, &tok)
	return u.ID, tok.AccessToken
}

// TestAdminWriteInFlightWhenTheAdminIsDeletedOrDemoted: an Admin's write that passed the guard
// while the Admin's deletion or demotion was being committed elsewhere is refused (401 deleted,
// 403 demoted) and writes nothing, instead of running as Admin after the change committed. The
// change is held uncommitted in a transaction of the test (as DELETE/PUT /api/users/{id} would
// have it, on another replica) while the write is sent: the guard, reading committed state, lets
// it in; the write then waits on the caller's row, the test sees it waiting in PostgreSQL,
// commits the change, and the write re-checks its caller in its own transaction.
func TestAdminWriteInFlightWhenTheAdminIsDeletedOrDemoted(t *testing.T) {
	a := apptest.Start(t)
	root := a.AdminToken(t)

	cases := []struct {
		name   string
		change string // applied to the caller's row (id ?)
		want   int
		write  func(tok, tag string) apptest.Request
		gone   string // counts what the write would have made; must stay 0
	}{
		{"deleted admin creates an Admin", "UPDATE users SET deleted_at = now(), security_stamp = security_stamp + 1, updated_at = now() WHERE id = ?",
			http.StatusUnauthorized,
			func(tok, tag string) apptest.Request {
				return apptest.Request{Method: http.MethodPost, Path: "/api/users", Token: tok, Body: map[string]any{
					"fullName": "Sneaky", "email": tag + "@probe.test", "password": "sneaky-secret-phrase-2", "role": "Admin"}}
			}, "SELECT count(*) FROM users WHERE email = ? || '@probe.test'"},
		{"demoted admin creates an Admin", "UPDATE users SET role = 'User', updated_at = now() WHERE id = ?",
			http.StatusForbidden,
			func(tok, tag string) apptest.Request {
				return apptest.Request{Method: http.MethodPost, Path: "/api/users", Token: tok, Body: map[string]any{
					"fullName": "Sneaky", "email": tag + "@probe.test", "password": "sneaky-secret-phrase-2", "role": "Admin"}}
			}, "SELECT count(*) FROM users WHERE email = ? || '@probe.test'"},
		{"demoted admin writes an audit note", "UPDATE users SET role = 'User', updated_at = now() WHERE id = ?",
			http.StatusForbidden,
			func(tok, tag string) apptest.Request {
				return apptest.Request{Method: http.MethodPost, Path: "/api/audit-events", Token: tok, Body: map[string]any{
					"action": "note.added", "targetType": "note", "targetId": tag}}
			}, "SELECT count(*) FROM audit_events WHERE target_id = ?"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id, tok := signIn(t, a, root, "Admin")
			require.Equal(t, http.StatusOK, a.Get("/api/users", tok).Status) // the guard knows it as Admin
			tag := "sneaky-" + testutil.RandomSuffix()
			ctx := context.Background()

			tx, err := a.DB.BeginTx(ctx, &sql.TxOptions{})
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			// As DELETE and PUT /api/users/{id} do: the row locked FOR UPDATE, then changed.
			_, err = tx.ExecContext(ctx, "SELECT id FROM users WHERE id = ? FOR UPDATE", id)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx, tc.change, id)
			require.NoError(t, err)

			req := tc.write(tok, tag)
			req.SkipSync = true
			done := make(chan *apptest.Resp, 1)
			go func() { done <- a.Do(req) }()

			// The write waits on the caller's row, locked by the uncommitted change.
			a.AwaitLockWaits(t, 1, `FROM "users"`, func() string {
				select {
				case r := <-done:
					_ = tx.Rollback()
					return fmt.Sprintf("the write did not wait for the change of its caller: %d %s", r.Status, r.Raw)
				default:
					return ""
				}
			})
			require.NoError(t, tx.Commit())

			r := <-done
			assert.Equal(t, tc.want, r.Status, string(r.Raw))
			var n int
			require.NoError(t, a.DB.QueryRowContext(ctx, tc.gone, tag).Scan(&n))
			assert.Zero(t, n, "the refused write left nothing")
		})
	}
}

// TestAdminsDeletingEachOtherAtOnce: two Admins deleting each other at the same moment do not
// deadlock: one deletion wins, the other Admin's request finds its caller deleted (401).
func TestAdminsDeletingEachOtherAtOnce(t *testing.T) {
	a := apptest.Start(t)
	root := a.AdminToken(t)
	for i := 0; i < 5; i++ {
		x, xt := signIn(t, a, root, "Admin")
		y, yt := signIn(t, a, root, "Admin")
		res := make(chan int, 2)
		for _, c := range []struct {
			tok    string
			target int64
		}{{xt, y}, {yt, x}} {
			go func() {
				res <- a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/users/%d", c.target),
					Token: c.tok, SkipSync: true}).Status
			}()
		}
		got := []int{<-res, <-res}
		assert.ElementsMatch(t, []int{http.StatusOK, http.StatusUnauthorized}, got, "round %d", i)
	}
}
