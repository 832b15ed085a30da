package aikeys_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/modules/aikeys/aikeystest"
)

// checkOpenAIError asserts raw is what the document puts on the pass-through's errors
// (AikeysOpenAIErrorObject): {"error": {message, type, param, code}}, no other member, message and
// type strings, param and code a string or null, sent as application/json.
func checkOpenAIError(t *testing.T, res *http.Response, raw string) map[string]any {
	t.Helper()
	assert.Equal(t, "application/json", strings.Split(res.Header.Get("Content-Type"), ";")[0], raw)
	var top map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &top), raw)
	require.Len(t, top, 1, raw)
	e, ok := top["error"].(map[string]any)
	require.True(t, ok, raw)
	assert.Len(t, e, 4, "only message, type, param, code: %s", raw)
	for _, f := range []string{"message", "type"} {
		s, ok := e[f].(string)
		assert.True(t, ok && s != "", "%s is a non-empty string: %s", f, raw)
	}
	for _, f := range []string{"param", "code"} {
		v, present := e[f]
		_, isString := v.(string)
		assert.True(t, present && (v == nil || isString), "%s is a string or null: %s", f, raw)
	}
	return e
}

// TestPassthroughAnswersOnlyDocumentedStatuses: the pass-through relayed any upstream status but
// 401, 403 and 5xx: a 302 (a wrong Ai:BaseUrl's http→https redirect) reached the SDK as a bare 302,
// a 201 was relayed and metered, a 402, 405 or 408 relayed. Streamed or not, only the client's own
// refusals (400, 404, 409, 413, 422 with a JSON error) and 429 are relayed; an upstream 408 is a
// 502 upstream_timeout, every other status a 502 upstream_error; none is metered. /api/ai/generate
// refused the input (400) on any JSON 4xx but 401, 403, 407, 408 and 429: a 402 or 405 too.
func TestPassthroughAnswersOnlyDocumentedStatuses(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	completion := `{"id":"chatcmpl-1","object":"chat.completion","model":"fake-model","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":2,"total_tokens":13}}`
	jsonErr := `{"error":{"message":"nope","type":"invalid_request_error","param":null,"code":null}}`
	cases := []struct {
		fail   int
		body   string
		header map[string]string
		want   int
		code   string
	}{
		{fail: http.StatusFound, body: jsonErr, want: http.StatusBadGateway, code: "upstream_error"},
		// A redirect with a Location: net/http followed it for streams (a 307 sends the POST again).
		{fail: http.StatusTemporaryRedirect, body: jsonErr, header: map[string]string{"Location": up.URL + "/chat/completions"}, want: http.StatusBadGateway, code: "upstream_error"},
		{fail: http.StatusCreated, body: completion, want: http.StatusBadGateway, code: "upstream_error"},
		{fail: http.StatusAccepted, body: completion, want: http.StatusBadGateway, code: "upstream_error"},
		{fail: http.StatusPaymentRequired, body: jsonErr, want: http.StatusBadGateway, code: "upstream_error"},
		{fail: http.StatusMethodNotAllowed, body: jsonErr, want: http.StatusBadGateway, code: "upstream_error"},
		{fail: http.StatusProxyAuthRequired, body: jsonErr, want: http.StatusBadGateway, code: "upstream_error"},
		{fail: http.StatusGone, body: jsonErr, want: http.StatusBadGateway, code: "upstream_error"},
		{fail: http.StatusRequestTimeout, body: jsonErr, want: http.StatusBadGateway, code: "upstream_timeout"},
		{fail: http.StatusUnauthorized, want: http.StatusBadGateway, code: "upstream_error"},
		{fail: http.StatusServiceUnavailable, body: jsonErr, want: http.StatusBadGateway, code: "upstream_error"},
		{fail: http.StatusNotFound, body: `<html>not here</html>`, header: map[string]string{"Content-Type": "text/html"}, want: http.StatusBadGateway, code: "upstream_error"},
		{fail: http.StatusBadRequest, body: jsonErr, want: http.StatusBadRequest},
		{fail: http.StatusNotFound, body: jsonErr, want: http.StatusNotFound},
		{fail: http.StatusConflict, body: jsonErr, want: http.StatusConflict},
		{fail: http.StatusRequestEntityTooLarge, body: jsonErr, want: http.StatusRequestEntityTooLarge},
		{fail: http.StatusUnprocessableEntity, body: jsonErr, want: http.StatusUnprocessableEntity},
		{fail: http.StatusTooManyRequests, body: jsonErr, want: http.StatusTooManyRequests},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			up.Set(func(b *aikeystest.Behaviour) {
				b.Fail, b.FailBody, b.FailHeader, b.FailOnce = tc.fail, tc.body, tc.header, true
			})
			body := streamBody(map[string]any{"stream": stream})
			res, raw := chatRaw(t, a, k.Key, body)
			name := fmt.Sprintf("upstream %d stream=%v", tc.fail, stream)
			require.Equal(t, tc.want, res.StatusCode, "%s: %s", name, raw)
			e := checkOpenAIError(t, res, raw)
			if tc.code != "" {
				assert.Equal(t, tc.code, e["code"], name)
				assert.Equal(t, "server_error", e["type"], name)
			} else {
				assert.Equal(t, "nope", e["message"], name)
			}
			assert.Empty(t, res.Header.Get("Location"), name)
		}
		// /api/ai/generate takes the same statuses for the client's refusals (400 in the
		// envelope); a 402, 405 or 410 refused the gateway, not the client's input: 502.
		up.Set(func(b *aikeystest.Behaviour) {
			b.Fail, b.FailBody, b.FailHeader, b.FailOnce = tc.fail, tc.body, tc.header, true
		})
		want := tc.want
		if want != http.StatusBadGateway && want != http.StatusTooManyRequests {
			want = http.StatusBadRequest
		}
		r := generate(a, k.Key)
		assert.Equal(t, want, r.Status, "generate, upstream %d: %s", tc.fail, r.Raw)
	}
	assert.EqualValues(t, 0, usageOf(t, a, u.Token).Usage.Requests, "no answer but a 200 is metered")
}

// TestRelayedErrorsMatchTheDocumentedSchema: an upstream 404 {"error":{"message":"bad model"}} or
// a text/plain 429 "slow down" was relayed as it was, against the documented error schema (message,
// type, param and code required, nothing else). Relayed errors are OpenAI's shape as JSON: the
// upstream's fields kept when they are strings (param and code may be null), the rest filled in.
func TestRelayedErrorsMatchTheDocumentedSchema(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	cases := []struct {
		fail   int
		body   string
		header map[string]string
		want   map[string]any
	}{
		{http.StatusNotFound, `{"error":{"message":"bad model"}}`, nil,
			map[string]any{"message": "bad model", "type": "invalid_request_error", "param": nil, "code": nil}},
		{http.StatusTooManyRequests, "slow down", map[string]string{"Content-Type": "text/plain"},
			map[string]any{"message": "The AI upstream is rate limiting; retry later", "type": "requests", "param": nil, "code": nil}},
		{http.StatusTooManyRequests, "<html>Too Many Requests</html>", map[string]string{"Content-Type": ""},
			map[string]any{"message": "The AI upstream is rate limiting; retry later", "type": "requests", "param": nil, "code": nil}},
		// vLLM: top-level members, a numeric code; extra members dropped.
		{http.StatusBadRequest, `{"object":"error","message":"too long","type":"BadRequestError","param":null,"code":400}`, nil,
			map[string]any{"message": "too long", "type": "BadRequestError", "param": nil, "code": nil}},
		// Ollama: the error a string.
		{http.StatusNotFound, `{"error":"model 'nope' not found"}`, nil,
			map[string]any{"message": "model 'nope' not found", "type": "invalid_request_error", "param": nil, "code": nil}},
		{http.StatusUnprocessableEntity, `{"error":{"message":"bad","type":7,"param":{"x":1},"code":"bad_temp","extra":true},"more":1}`, nil,
			map[string]any{"message": "bad", "type": "invalid_request_error", "param": nil, "code": "bad_temp"}},
		{http.StatusConflict, `{"error":{"message":"","type":"conflict","param":"model","code":"busy"}}`, nil,
			map[string]any{"message": "The AI upstream refused the request (409)", "type": "conflict", "param": "model", "code": "busy"}},
		// FastAPI
		{http.StatusUnprocessableEntity, `{"detail":"field required"}`, nil,
			map[string]any{"message": "field required", "type": "invalid_request_error", "param": nil, "code": nil}},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			up.Set(func(b *aikeystest.Behaviour) { b.Fail, b.FailBody, b.FailHeader = tc.fail, tc.body, tc.header })
			res, raw := chatRaw(t, a, k.Key, streamBody(map[string]any{"stream": stream}))
			name := fmt.Sprintf("%d %q stream=%v", tc.fail, tc.body, stream)
			require.Equal(t, tc.fail, res.StatusCode, "%s: %s", name, raw)
			assert.Equal(t, tc.want, checkOpenAIError(t, res, raw), name)
		}
	}

	// A long message with our key, control and bidi characters: one line, capped, redacted.
	up.Set(func(b *aikeystest.Behaviour) {
		b.Fail, b.FailHeader = http.StatusBadRequest, nil
		b.FailBody = fmt.Sprintf(`{"error":{"message":"bad\nrequest \u001b %s \u202e%s","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, upstreamKey, strings.Repeat("x", 5000))
	})
	for _, stream := range []bool{false, true} {
		res, raw := chatRaw(t, a, k.Key, streamBody(map[string]any{"stream": stream}))
		require.Equal(t, http.StatusBadRequest, res.StatusCode, raw)
		e := checkOpenAIError(t, res, raw)
		msg, _ := e["message"].(string)
		assert.True(t, strings.HasPrefix(msg, "bad request [redacted] xxx"), msg)
		assert.False(t, strings.ContainsAny(msg, "\n\u001b\u202e"), msg)
		assert.LessOrEqual(t, utf8.RuneCountInString(msg), 2000, "capped")
		assert.NotContains(t, raw, upstreamKey)
		assert.Equal(t, "messages", e["param"])
		assert.Equal(t, "context_length_exceeded", e["code"])
	}
}

// TestUpstream429AlwaysCarriesRetryAfter: an upstream 429 without Retry-After was relayed without
// one, though the document (and /api/ai/generate) always send it: 1 s when the upstream gave
// none, its own seconds, or the seconds until the date it gave.
func TestUpstream429AlwaysCarriesRetryAfter(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	for _, tc := range []struct{ sent, want string }{{"", "1"}, {"12", "12"}, {"soon", "1"}} {
		up.Set(func(b *aikeystest.Behaviour) {
			b.Fail, b.FailHeader = http.StatusTooManyRequests, map[string]string{"Retry-After": tc.sent}
		})
		for _, stream := range []bool{false, true} {
			res, raw := chatRaw(t, a, k.Key, streamBody(map[string]any{"stream": stream}))
			require.Equal(t, http.StatusTooManyRequests, res.StatusCode, raw)
			assert.Equal(t, tc.want, res.Header.Get("Retry-After"), "upstream Retry-After %q stream=%v", tc.sent, stream)
		}
		r := generate(a, k.Key)
		require.Equal(t, http.StatusTooManyRequests, r.Status)
		assert.Equal(t, tc.want, r.Header.Get("Retry-After"), "generate, upstream %q", tc.sent)
	}
	up.Set(func(b *aikeystest.Behaviour) {
		b.FailHeader = map[string]string{"Retry-After": time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)}
	})
	res, raw := chatRaw(t, a, k.Key, streamBody(map[string]any{"stream": false}))
	require.Equal(t, http.StatusTooManyRequests, res.StatusCode, raw)
	n, err := strconv.Atoi(res.Header.Get("Retry-After"))
	require.NoError(t, err, "an HTTP date becomes seconds")
	assert.InDelta(t, 30, n, 3)
}
