package app_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// TestRateLimitSharedAcrossReplicas: two instances over the same database and Redis (how users
// scale out); the request past a limit is refused whichever instance gets it.
func TestRateLimitSharedAcrossReplicas(t *testing.T) {
	kv := map[string]any{"Redis:KeyPrefix": "replicas" + testutil.RandomSuffix(), "RateLimit:Login": "3-M"}
	one := apptest.Start(t, apptest.With(kv))
	two := apptest.Start(t, apptest.With(kv))
	u := one.Register(t)
	body := map[string]any{"email": u.Email, "password": "wrong-password"}
	got := []int{
		one.Post("/api/auth/login", "", body).Status,
		two.Post("/api/auth/login", "", body).Status,
		one.Post("/api/auth/login", "", body).Status,
		two.Post("/api/auth/login", "", body).Status,
		one.Post("/api/auth/login", "", body).Status,
	}
	assert.Equal(t, []int{401, 401, 401, 429, 429}, got)
	assert.Equal(t, http.StatusOK, two.Get("/api/me", u.Token).Status, "tokens work on every replica")
}

// TestUserChangesReachTheOtherReplicaWithTheAnswer: the principal of a token is cached on every
// replica; a role change or a deletion answered by one replica is in force on the other for the
// very next request (no waiting, no retry: SkipSync sends it at once), even though the other
// replica applies changes 150 ms late.
func TestUserChangesReachTheOtherReplicaWithTheAnswer(t *testing.T) {
	kv := map[string]any{"Redis:KeyPrefix": "replicas" + testutil.RandomSuffix()}
	one := apptest.Start(t, apptest.With(kv))
	two := apptest.Start(t, apptest.With(kv), apptest.WithFeedLag(150*time.Millisecond))
	admin := one.AdminToken(t)
	u := one.Register(t)
	onTwo := func(path string) int {
		return two.Do(apptest.Request{Method: http.MethodGet, Path: path, Token: u.Token, SkipSync: true}).Status
	}
	settle := func() { // both replicas applied everything so far, and replica two caches the user
		require.NoError(t, two.Bus.Sync(context.Background()))
		require.Equal(t, http.StatusOK, onTwo("/api/me"))
	}
	settle()
	require.Equal(t, http.StatusForbidden, onTwo("/api/users"))
	for _, step := range []struct {
		role  string
		users int
	}{{"Admin", http.StatusOK}, {"User", http.StatusForbidden}, {"Admin", http.StatusOK}} {
		settle()
		r := one.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin,
			Body: map[string]any{"role": step.role}, SkipSync: true})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		assert.Equal(t, step.users, onTwo("/api/users"), "role %s on the other replica", step.role)
	}
	settle()
	r := one.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin, SkipSync: true})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, http.StatusUnauthorized, onTwo("/api/me"), "a deleted user's token is refused on the other replica")
}
