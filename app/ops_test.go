package app_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

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

// TestMetricsAfterMixedTraffic: requests of several methods on one keep-alive connection (fasthttp
// reuses its buffers between them) leave /metrics answering 200 with each method's own label.
func TestMetricsAfterMixedTraffic(t *testing.T) {
	a := apptest.Start(t)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	for i := 0; i < 20; i++ {
		for _, m := range []string{"GET", "DELETE", "POST", "PUT", "PATCH", "OPTIONS"} {
			req, err := http.NewRequest(m, a.URL+"/api/me/ai-keys/1", nil)
			require.NoError(t, err)
			res, err := client.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
	}
	res, err := client.Get(a.URL + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(body))
	for _, line := range strings.Split(string(body), "\n") {
		if m, ok := strings.CutPrefix(line, "http_requests_total{method=\""); ok {
			m, _, _ = strings.Cut(m, "\"")
			assert.Contains(t, []string{"GET", "HEAD", "DELETE", "POST", "PUT", "PATCH", "OPTIONS"}, m, line)
		}
	}
	assert.Contains(t, string(body), `http_requests_total{method="DELETE",route="/api/me/ai-keys/:id",status="401"} 20`)
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

// TestMetricsAreServedOnlyToOperators: /metrics answers loopback, Ops:MetricsAllowedCidrs and the
// bearer Ops:MetricsToken; any other client, and a request a proxy relayed from elsewhere, gets
// the 404 of a path no route takes.
func TestMetricsAreServedOnlyToOperators(t *testing.T) {
	const token = "metrics-4f9c1d7a2b8e6f30c5d9a1e7b3f2c8d6"
	a := apptest.Start(t, apptest.With(map[string]any{"Server:TrustedProxies": []string{"127.0.0.1"},
		"Ops:MetricsAllowedCidrs": []string{"198.51.100.0/24"}, "Ops:MetricsToken": token}))
	get := func(header ...string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, a.URL+"/metrics", nil)
		require.NoError(t, err)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	status, body := get()
	assert.Equal(t, http.StatusOK, status, "loopback")
	assert.Contains(t, body, "go_goroutines")

	for name, h := range map[string][]string{
		"a stranger":                       {"X-Forwarded-For", "203.0.113.7"},
		"a stranger with a wrong token":    {"X-Forwarded-For", "203.0.113.7", "Authorization", "Bearer " + token + "x"},
		"a stranger with the token's head": {"X-Forwarded-For", "203.0.113.7", "Authorization", "Bearer " + token[:20]},
		"a stranger with a basic token":    {"X-Forwarded-For", "203.0.113.7", "Authorization", "Basic " + token},
		"relayed by a local proxy":         {"X-Forwarded-For", "127.0.0.1"},
	} {
		status, body := get(h...)
		assert.Equal(t, http.StatusNotFound, status, name)
		assert.False(t, strings.Contains(body, "go_goroutines"), "%s: no metrics", name)
		assert.True(t, strings.Contains(body, "No route matches GET /metrics"), "%s: %.200s", name, body)
	}
	for name, h := range map[string][]string{
		"an allowed network":           {"X-Forwarded-For", "198.51.100.9"},
		"a stranger with the token":    {"X-Forwarded-For", "203.0.113.7", "Authorization", "Bearer " + token},
		"the token, scheme lower-case": {"X-Forwarded-For", "203.0.113.7", "Authorization", "bearer " + token},
	} {
		status, body := get(h...)
		assert.Equal(t, http.StatusOK, status, name)
		assert.True(t, strings.Contains(body, "go_goroutines"), "%s: %.200s", name, body)
	}
}
