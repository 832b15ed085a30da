package ops_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/testutil"
	"provisioner/platform/testutil/apptest"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func TestHealthReadinessMetricsAndDocs(t *testing.T) {
	a := apptest.Start(t)
	r := a.Get("/healthz", "")
	assert.Equal(t, http.StatusOK, r.Status)
	r = a.Get("/readyz", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"database":"ok"`)
	assert.Contains(t, string(r.Raw), `"redis":"ok"`)

	a.Get("/api/me", "")
	res, err := http.Get(a.URL + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Contains(t, string(body), `http_requests_total{method="GET",route="/api/me",status="401"}`)
	assert.Contains(t, string(body), "http_request_duration_seconds_bucket")
	assert.Contains(t, string(body), "go_goroutines")

	res, err = http.Get(a.URL + "/api/docs")
	require.NoError(t, err)
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, string(body), "swagger-ui")
	assert.NotContains(t, string(body), "https://", "no CDN: the page works offline")
	for _, asset := range []string{"/api/docs/assets/swagger-ui-bundle.js", "/api/docs/assets/swagger-ui.css", "/api/docs/init.js"} {
		res, err = http.Get(a.URL + asset)
		require.NoError(t, err)
		res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode, asset)
	}
}

// With Redis unreachable the service starts, answers without 500s (limits fall back to the
// in-process store), and /readyz tells the truth.
func TestRedisDownReadinessAndNoServerErrors(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"Redis:Url": "redis://127.0.0.1:1/0", "RateLimit:Login": "2-M"}))
	r := a.Get("/readyz", "")
	assert.Equal(t, http.StatusServiceUnavailable, r.Status)
	assert.Contains(t, string(r.Raw), `"redis":"down"`)
	assert.False(t, r.Env.Success)

	u := a.Register(t)
	assert.Equal(t, http.StatusOK, a.Get("/api/me", u.Token).Status)
	codes := []int{}
	for i := 0; i < 3; i++ {
		codes = append(codes, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": "wrong-password"}).Status)
	}
	assert.Equal(t, []int{401, 401, 429}, codes, "the login limit still applies while Redis is down")
	assert.True(t, strings.Contains(a.Get("/healthz", "").Env.Message, "OK"))
}
