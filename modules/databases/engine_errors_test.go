package databases_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
	"provisioner/platform/testutil"
)

// assertSanitised checks that an errorMessage shown to users names the failure's class only:
// no statement, no admin role, no address.
func assertSanitised(t *testing.T, want, msg string) {
	t.Helper()
	assert.Equal(t, want, msg)
	for _, leak := range []string{"127.0.0.1", ":1", "user=", "postgres", "root", "CREATE", "DROP", "SELECT", "tcp", "dial"} {
		assert.NotContains(t, msg, leak)
	}
}

// assertTriedAgainIn checks that a 502 for a change left pending says when it is tried again.
func assertTriedAgainIn(t *testing.T, r *apptest.Resp, what string) {
	t.Helper()
	assert.Regexp(t, `^[1-9][0-9]*$`, r.Header.Get("Retry-After"), "a pending %s's 502 says when it is tried again", what)
}

// TestEngineErrorsShownAreSanitised: when the engine is unreachable, the errorMessage of a
// database (in the 502 answer, in the user's list and in the administrators' list) says
// "engine unreachable" and nothing of the engine's own error text (no statement, admin role or
// address).
func TestEngineErrorsShownAreSanitised(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	down := apptest.Start(t, apptest.With(map[string]any{
		"ConnectionStrings:TenantPostgres": "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2",
		"ConnectionStrings:TenantMysql":    "root@tcp(127.0.0.1:1)/?timeout=2s",
		"Databases:RecoveryHours":          0, // a DELETE drops at once
	}))
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			r := down.Post("/api/me/databases", u.Token, map[string]any{"engine": engine})
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			var failed item
			r.Decode(t, &failed)
			assert.Equal(t, "Provisioning", failed.Status)
			assertTriedAgainIn(t, r, "create")
			assertSanitised(t, "create: engine unreachable", failed.ErrorMessage)

			alive := create(t, a, u.Token, engine)
			r = down.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", alive.ID), Token: u.Token})
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			var dropped item
			r.Decode(t, &dropped)
			assertTriedAgainIn(t, r, "drop")
			assertSanitised(t, "drop: engine unreachable", dropped.ErrorMessage)

			r = a.Get("/api/me/databases", u.Token)
			require.Equal(t, http.StatusOK, r.Status)
			var mine []item
			r.Decode(t, &mine)
			shown := map[int64]string{}
			for _, it := range mine {
				shown[it.ID] = it.ErrorMessage
			}
			assert.Equal(t, "create: engine unreachable", shown[failed.ID])
			assert.Equal(t, "drop: engine unreachable", shown[alive.ID])
			r = a.Get(fmt.Sprintf("/api/database-instances?userId=%d", u.ID), admin)
			require.Equal(t, http.StatusOK, r.Status)
			assert.Contains(t, string(r.Raw), "create: engine unreachable")
			assert.NotContains(t, string(r.Raw), "127.0.0.1:1")
			assert.NotContains(t, string(r.Raw), "user=")
		})
	}
}

// TestAnErrorOfOursIsNotShown: an attempt that failed on the service's side (here the control
// database refusing to record the database Active) was stored and shown verbatim as errorMessage,
// with PostgreSQL's words and SQLSTATE. It is shown as a generic text; the engine's work is kept
// and the next attempt adopts it.
func TestAnErrorOfOursIsNotShown(t *testing.T) {
	a := start(t, nil)
	u := a.Register(t)
	drop := testutil.RefuseUpdates(t, a.DB, "database_instances", fmt.Sprintf("NEW.status = 'Active' AND NEW.user_id = %d", u.ID))

	r := a.Post("/api/me/databases", u.Token, map[string]any{"engine": "postgres"})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var it item
	r.Decode(t, &it)
	assert.Equal(t, "Provisioning", it.Status)
	assert.Equal(t, databases.MsgInternal, it.ErrorMessage)
	for _, leak := range []string{"secret_table", "SQLSTATE", "ERROR"} {
		assert.NotContains(t, string(r.Raw), leak)
	}
	r = a.Get("/api/me/databases", u.Token)
	assert.NotContains(t, string(r.Raw), "secret_table")

	drop()
	_, err := a.DB.Exec("UPDATE database_instances SET next_attempt_at = now() WHERE id = ?", it.ID) // skip the backoff
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	r = a.Get("/api/me/databases", u.Token)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var mine []item
	r.Decode(t, &mine)
	found := false
	for _, m := range mine {
		if m.ID == it.ID {
			found = true
			assert.Equal(t, "Active", m.Status)
			assert.Empty(t, m.ErrorMessage)
		}
	}
	assert.True(t, found)
}
