package aikeys_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys/aikeystest"
	"provisioner/platform/testutil"
)

// usageOf answers the key's usage once the meter flushed at least want requests (or after 3 s).
func usageOf(t *testing.T, a *apptest.App, token string) keyView {
	t.Helper()
	var got keyView
	time.Sleep(1500 * time.Millisecond) // the meter flushes every second
	var ks []keyView
	a.Get("/api/me/ai-keys", token).Decode(t, &ks)
	require.Len(t, ks, 1)
	got = ks[0]
	return got
}

// TestNonJSONSuccessIsA502: a non-streamed pass-through relayed an upstream 200 text/html (a
// proxy's page) as a 200 and metered it, while the stream path and /generate answered 502. It is
// a 502 upstream_malformed in OpenAI's format, and not metered.
func TestNonJSONSuccessIsA502(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	for _, body := range []string{`<html>gateway</html>`, `null`, `[1]`, `{"choices":`} {
		up.Set(func(b *aikeystest.Behaviour) { b.OKBody = body })
		res, raw := chatRaw(t, a, k.Key, map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}})
		require.Equal(t, http.StatusBadGateway, res.StatusCode, "%s: %s", body, raw)
		var oe openAIError
		require.NoError(t, json.Unmarshal([]byte(raw), &oe), raw)
		assert.Equal(t, "upstream_malformed", oe.Error.Code, body)
		assert.Equal(t, "server_error", oe.Error.Type)
		assert.NotContains(t, raw, "gateway</html>")
	}
	assert.EqualValues(t, 0, usageOf(t, a, u.Token).Usage.Requests, "not metered")
}

// TestUpstream429CarriesOnlyItsRetryAfter: a relayed upstream 429 carried our own
// X-RateLimit-Remaining next to the upstream's Retry-After: 7 (keep going / wait). It carries the
// upstream's Retry-After only, on both routes; our own headers stay on other answers.
func TestUpstream429CarriesOnlyItsRetryAfter(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	ours := []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy"}
	res := chat(t, a, "X-API-Key", k.Key, false)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.NotEmpty(t, res.Header.Get("X-RateLimit-Remaining"), "our headers on a success")

	up.Set(func(b *aikeystest.Behaviour) { b.Fail = http.StatusTooManyRequests })
	for _, stream := range []bool{false, true} {
		res := chat(t, a, "X-API-Key", k.Key, stream)
		res.Body.Close()
		require.Equal(t, http.StatusTooManyRequests, res.StatusCode)
		assert.Equal(t, "7", res.Header.Get("Retry-After"))
		for _, h := range ours {
			assert.Empty(t, res.Header.Get(h), "stream=%v: %s", stream, h)
		}
	}
	r := generate(a, k.Key)
	require.Equal(t, http.StatusTooManyRequests, r.Status, string(r.Raw))
	assert.Equal(t, "7", r.Header.Get("Retry-After"))
	for _, h := range ours {
		assert.Empty(t, r.Header.Get(h), "generate: %s", h)
	}
}

// post sends body to path with the headers given (a header may repeat).
func post(t *testing.T, a *apptest.App, path string, body any, headers [][2]string) (int, string) {
	t.Helper()
	raw, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", a.URL+path, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for _, h := range headers {
		req.Header.Add(h[0], h[1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

// TestAmbiguousCredentialsAreRefused: two different X-API-Key headers were accepted (the first
// used and charged). Two keys, or an X-API-Key and a different Bearer on the pass-through, are a
// 401 in the route's format; the same key twice still works.
func TestAmbiguousCredentialsAreRefused(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k1 := newKey(t, a, u.Token, nil)
	k2 := newKey(t, a, u.Token, map[string]any{"name": "second"})
	chatBody := map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}}
	genBody := map[string]any{"prompt": "hi"}
	before := upstreamCalls(up)
	for name, hs := range map[string][][2]string{
		"two keys":        {{"X-API-Key", k1.Key}, {"X-API-Key", k2.Key}},
		"key and bearer":  {{"X-API-Key", k1.Key}, {"Authorization", "Bearer " + k2.Key}},
		"two bearers":     {{"Authorization", "Bearer " + k1.Key}, {"Authorization", "Bearer " + k2.Key}},
		"key and a JWT":   {{"X-API-Key", k1.Key}, {"Authorization", "Bearer " + u.Token}},
		"a key, one junk": {{"X-API-Key", k1.Key}, {"X-API-Key", "sk-prov-nope"}},
	} {
		status, raw := post(t, a, "/api/ai/v1/chat/completions", chatBody, hs)
		assert.Equal(t, http.StatusUnauthorized, status, "%s: %s", name, raw)
		var oe openAIError
		require.NoError(t, json.Unmarshal([]byte(raw), &oe), raw)
		assert.Equal(t, "invalid_api_key", oe.Error.Code, name)
		assert.Contains(t, oe.Error.Message, "Ambiguous", name)
		if hs[1][0] == "X-API-Key" {
			status, raw = post(t, a, "/api/ai/generate", genBody, hs)
			assert.Equal(t, http.StatusUnauthorized, status, "generate %s: %s", name, raw)
			assert.Contains(t, raw, `"success":false`, "our envelope")
		}
	}
	assert.Equal(t, before, upstreamCalls(up), "nothing went upstream")
	for name, hs := range map[string][][2]string{
		"the same key twice":   {{"X-API-Key", k1.Key}, {"X-API-Key", k1.Key}},
		"key and same bearer":  {{"X-API-Key", k1.Key}, {"Authorization", "Bearer " + k1.Key}},
		"key and basic auth":   {{"X-API-Key", k1.Key}, {"Authorization", "Basic eDp5"}},
		"one bearer, one key ": {{"Authorization", "Bearer " + k2.Key}},
	} {
		status, raw := post(t, a, "/api/ai/v1/chat/completions", chatBody, hs)
		assert.Equal(t, http.StatusOK, status, "%s: %s", name, raw)
	}
	status, raw := post(t, a, "/api/ai/generate", genBody, [][2]string{{"X-API-Key", k1.Key}, {"X-API-Key", k1.Key}})
	assert.Equal(t, http.StatusOK, status, raw)
}

// TestGenerateModelMustBePrintable: /api/ai/generate passed a model holding CR/LF or control
// characters upstream and echoed it. It is a 400 under model; nothing goes upstream.
func TestGenerateModelMustBePrintable(t *testing.T) {
	t.Parallel()
	a, up := setup(t, map[string]any{"Ai:AllowedModels": "*"})
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	before := upstreamCalls(up)
	for _, model := range []string{"fake\r\nX-Injected: 1", "fake\x00model", "\u202eledom", "fa\u200bke", strings.Repeat("m", 201)} {
		r := a.Do(apptest.Request{Method: "POST", Path: "/api/ai/generate", Body: map[string]any{"prompt": "hi", "model": model},
			Header: map[string]string{"X-API-Key": k.Key}, SkipSync: true})
		require.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", model, r.Raw)
		assert.Equal(t, []string{"model"}, r.Fields(), "%q", model)
	}
	assert.Equal(t, before, upstreamCalls(up), "nothing went upstream")
	r := a.Do(apptest.Request{Method: "POST", Path: "/api/ai/generate", Body: map[string]any{"prompt": "hi", "model": "llama3.1:8b-instruct"},
		Header: map[string]string{"X-API-Key": k.Key}, SkipSync: true})
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
}

// TestGatewaySecuritySchemesAreTheAIKey: the OpenAPI document listed bearerAuth ("JWT access token
// from /api/auth/login") on the pass-through, which refuses a JWT. Both generation operations
// list only the AI key's schemes; /generate documents its 429's Retry-After.
func TestGatewaySecuritySchemesAreTheAIKey(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	var doc struct {
		Paths map[string]map[string]struct {
			Security  []map[string][]string `json:"security"`
			Responses map[string]struct {
				Headers map[string]any `json:"headers"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			SecuritySchemes map[string]struct {
				Type, Scheme, In, Name, Description string
			} `json:"securitySchemes"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(testutil.InlineOpenAPI(t, a.Get("/api/openapi.json", "").Raw), &doc))
	schemes := func(path string) []string {
		var out []string
		for _, req := range doc.Paths[path]["post"].Security {
			for name := range req {
				out = append(out, name)
			}
		}
		return out
	}
	assert.ElementsMatch(t, []string{"apiKeyAuth", "aiKeyBearer"}, schemes("/api/ai/v1/chat/completions"))
	assert.Equal(t, []string{"apiKeyAuth"}, schemes("/api/ai/generate"))
	b := doc.Components.SecuritySchemes["aiKeyBearer"]
	assert.Equal(t, "http", b.Type)
	assert.Equal(t, "bearer", b.Scheme)
	assert.Contains(t, b.Description, "AI API key")
	assert.Equal(t, "X-API-Key", doc.Components.SecuritySchemes["apiKeyAuth"].Name)
	assert.Contains(t, doc.Paths["/api/ai/generate"]["post"].Responses["429"].Headers, "Retry-After")
}
