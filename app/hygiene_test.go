package app_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// TestEveryGetRouteAnswersHead: HEAD answered 405 on every GET route of the API, /healthz and
// /readyz included (RFC 9110: HEAD wherever GET). HEAD answers what GET answers, without a body.
func TestEveryGetRouteAnswersHead(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	checked := 0
	for _, op := range routeTable(t, a) {
		if op.Method != http.MethodGet {
			continue
		}
		t.Run(op.Path, func(t *testing.T) {
			get := a.Get(op.concrete("1"), admin)
			head := a.Do(apptest.Request{Method: http.MethodHead, Path: op.concrete("1"), Token: admin})
			assert.Equal(t, get.Status, head.Status, string(get.Raw))
			assert.Empty(t, head.Raw)
			assert.Equal(t, get.Header.Get("Content-Type"), head.Header.Get("Content-Type"))
		})
		checked++
	}
	assert.Greater(t, checked, 10)
	for _, path := range []string{"/metrics", "/api/docs", "/api/docs/assets/swagger-ui.css"} {
		assert.Equal(t, http.StatusOK, a.Do(apptest.Request{Method: http.MethodHead, Path: path}).Status, path)
	}
	r := a.Do(apptest.Request{Method: http.MethodPut, Path: "/healthz"})
	assert.Equal(t, http.StatusMethodNotAllowed, r.Status)
	assert.Equal(t, "GET, HEAD, OPTIONS", r.Header.Get("Allow"))
}

// TestSecretsAreNeverCached: the answers that carry a token, a password or a key said nothing
// about caching, so a browser or a proxy could keep them; none said nosniff.
func TestSecretsAreNeverCached(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	// No engine serves this app: the reveal answers 404, which must not be stored either.
	for name, r := range map[string]*apptest.Resp{
		"register": a.Post("/api/auth/register", "", map[string]any{"fullName": "C", "organization": "O",
			"email": "cache-" + u.Email, "password": u.Password}),
		"login":           a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password}),
		"password reveal": a.Get("/api/me/databases/1/password", u.Token),
		"AI key":          a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "k"}),
		"error":           a.Get("/api/me", ""),
		"OpenAI error":    a.Post("/api/ai/v1/chat/completions", "", map[string]any{}),
	} {
		assert.Less(t, r.Status, 500, "%s: %s", name, r.Raw)
		assert.Equal(t, "no-store", r.Header.Get("Cache-Control"), name)
		assert.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"), name)
	}
	// Routes that set their own caching keep it; the docs page keeps its CSP; /metrics works.
	assert.Equal(t, "public, max-age=86400", a.Get("/api/docs/assets/swagger-ui.css", "").Header.Get("Cache-Control"))
	docs := a.Get("/api/docs", "")
	assert.Equal(t, http.StatusOK, docs.Status)
	assert.Contains(t, docs.Header.Get("Content-Security-Policy"), "default-src 'self'")
	m := a.Get("/metrics", "")
	assert.Equal(t, http.StatusOK, m.Status)
	assert.Contains(t, string(m.Raw), "http_requests_total")
}

// TestAnswersWithoutDataAreDocumentedAsNull: these operations answer `data: null` while the
// document said `data` was a required object; the pass-through's errors had no schema.
func TestAnswersWithoutDataAreDocumentedAsNull(t *testing.T) {
	a := apptest.Start(t)
	var doc struct {
		Paths      map[string]map[string]struct{ Responses map[string]docResponse } `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Type any `json:"type"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(testutil.InlineOpenAPI(t, a.Get("/api/openapi.json", "").Raw), &doc))
	for _, op := range []struct{ method, path string }{
		{"delete", "/api/users/{id}"}, {"delete", "/api/access-credentials/{id}"}, {"delete", "/api/audit-events/{id}"},
		{"post", "/api/auth/forgot-password"}, {"post", "/api/auth/reset-password"},
	} {
		ref := doc.Paths[op.path][op.method].Responses["200"].Content["application/json"].Schema.Ref
		s := doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
		assert.Equal(t, "null", s.Properties["data"].Type, "%s %s (%s)", op.method, op.path, ref)
	}
	for code, r := range doc.Paths["/api/ai/v1/chat/completions"]["post"].Responses {
		if code >= "400" {
			ref := r.Content["application/json"].Schema.Ref
			assert.True(t, strings.HasSuffix(ref, "OpenAIErrorDoc"), "%s: %q", code, ref)
		}
	}
}

type docResponse struct {
	Content map[string]struct {
		Schema struct {
			Ref string `json:"$ref"`
		} `json:"schema"`
	} `json:"content"`
}
