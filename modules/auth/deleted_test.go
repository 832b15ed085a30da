package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/platform/coherent"
)

// A request of a user deleted while it is in flight passed the guard (the principal cache has not
// heard of the deletion yet); the handler then finds the account gone. That is the token's
// subject gone: 401, as the guard answers once it knows, never 404 "User not found". An admin
// naming another, deleted user still gets 404.
func TestDeletedUsersInFlightRequestsAnswer401(t *testing.T) {
	// The change feed reaches this replica a second late (trusted for 5 s): the window in which a
	// request passes the guard with the deleted user's cached principal.
	const lag = time.Second
	a := apptest.Start(t, apptest.With(map[string]any{
		// An engine that is configured (never reached: the user lookup comes first).
		"ConnectionStrings:TenantPostgres": "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
	}), apptest.WithFx(fx.Decorate(func(db *bun.DB) *coherent.Bus {
		return coherent.New(db, coherent.Options{Lag: lag, Window: 10 * time.Second})
	})))
	admin := a.AdminToken(t)
	u := a.Register(t)
	require.Equal(t, http.StatusOK, a.Get("/api/me", u.Token).Status) // its principal is cached

	// Deleted the way DELETE /api/users/{id} deletes it, by a request this replica did not serve.
	start := time.Now()
	_, err := a.DB.ExecContext(context.Background(),
		"UPDATE users SET deleted_at = now(), security_stamp = security_stamp + 1 WHERE id = ?", u.ID)
	require.NoError(t, err)
	calls := []apptest.Request{
		{Method: http.MethodGet, Path: "/api/me"},
		{Method: http.MethodPost, Path: "/api/me/ai-keys", Body: map[string]any{"name": "in flight"}},
		{Method: http.MethodPost, Path: "/api/me/databases", Body: map[string]any{"engine": "postgres"}},
	}
	check := func(when string) {
		for _, c := range calls {
			c.Token, c.SkipSync = u.Token, true
			r := a.Do(c)
			assert.Equal(t, http.StatusUnauthorized, r.Status, "%s %s %s: %s", when, c.Method, c.Path, r.Raw)
			assert.Equal(t, "Invalid or expired token", r.Env.Message, "%s %s %s", when, c.Method, c.Path)
		}
	}
	check("before the cache knows")
	require.Less(t, time.Since(start), lag, "the requests above went through the handlers, not the guard")

	require.NoError(t, a.Bus.Sync(context.Background()))
	check("after the cache knows")

	// An admin naming the deleted user: that user is not found (404), the admin is fine.
	r := a.Post("/api/database-instances", admin, map[string]any{"userId": u.ID, "engine": "postgres"})
	assert.Equal(t, http.StatusNotFound, r.Status, string(r.Raw))
	assert.Equal(t, "User not found", r.Env.Message)
	assert.Equal(t, http.StatusNotFound, a.Get(fmt.Sprintf("/api/users/%d", u.ID), admin).Status)
}
