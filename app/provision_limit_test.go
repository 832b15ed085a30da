package app_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestProvisionLimitIsPerUserAcrossModules: RateLimit:Provision counts every state-changing route
// of databases, DNS, workflow automation and AI keys per user (the administrators' ones for the
// administrator). Past it: 429 with Retry-After and the rate-limit headers naming it, on any of
// those routes, whatever they would have answered; reads go on, and other users are not held up.
func TestProvisionLimitIsPerUserAcrossModules(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Provision": "3-M"}))
	u, other := a.Register(t), a.Register(t)

	r := a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "one"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var key struct {
		ID int64 `json:"id"`
	}
	r.Decode(t, &key)
	id := strconv.FormatInt(key.ID, 10)
	require.Equal(t, http.StatusOK, a.Post("/api/me/ai-keys/"+id+"/rotate", u.Token, map[string]any{}).Status)
	require.Equal(t, http.StatusOK, a.Do(apptest.Request{Method: http.MethodDelete, Path: "/api/me/ai-keys/" + id, Token: u.Token}).Status)

	for _, req := range []apptest.Request{
		{Method: http.MethodPost, Path: "/api/me/ai-keys", Body: map[string]any{"name": "two"}},
		{Method: http.MethodPost, Path: "/api/me/databases", Body: map[string]any{}},
		{Method: http.MethodPost, Path: "/api/me/dns", Body: map[string]any{"label": "myapp"}},
		{Method: http.MethodDelete, Path: "/api/me/dns/1"},
		{Method: http.MethodPost, Path: "/api/me/wfauto/provision"},
		{Method: http.MethodPost, Path: "/api/me/databases/1/pause"},
	} {
		req.Token = u.Token
		r := a.Do(req)
		require.Equal(t, http.StatusTooManyRequests, r.Status, "%s %s: %s", req.Method, req.Path, r.Raw)
		assert.NotEmpty(t, r.Header.Get("Retry-After"), req.Path)
		assert.Equal(t, "3", r.Header.Get("X-RateLimit-Limit"), req.Path)
		assert.Equal(t, "3;w=60", r.Header.Get("RateLimit-Policy"), req.Path)
		assert.Contains(t, r.Env.Message, "Provision", req.Path)
	}
	assert.Equal(t, http.StatusOK, a.Get("/api/me/ai-keys", u.Token).Status, "reads are not counted")
	assert.Equal(t, http.StatusCreated, a.Post("/api/me/ai-keys", other.Token, map[string]any{"name": "mine"}).Status,
		"another user has a budget of their own")

	admin := a.AdminToken(t)
	for i := range 3 {
		r := a.Post("/api/dns/records", admin, map[string]any{"label": "x" + strconv.Itoa(i), "userId": u.ID})
		require.NotEqual(t, http.StatusTooManyRequests, r.Status, "within the administrator's own budget")
	}
	r = a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": 1})
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "the administrators' changes count too: %s", r.Raw)
}
