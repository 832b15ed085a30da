package app_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"provisioner/platform/testutil"
	"provisioner/platform/testutil/apptest"
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
