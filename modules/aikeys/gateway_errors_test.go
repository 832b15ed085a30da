package aikeys_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys/aikeystest"
)

// TestUpstreamRefusalOfTheInputIsA400: an upstream 4xx that refuses the client's own input (an
// unknown model) was a 502 "the AI upstream answered 404", the upstream's words lost. It is a 400
// in the envelope quoting them (one line, capped, never Ai:ApiKey); 401 and 403, which refuse the
// gateway's key, stay 502.
func TestUpstreamRefusalOfTheInputIsA400(t *testing.T) {
	t.Parallel()
	a, up := setup(t, map[string]any{"Ai:AllowedModels": "*"}) // the upstream judges the model
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	fail := func(status int, body string) {
		up.Set(func(b *aikeystest.Behaviour) { b.Fail, b.FailBody = status, body })
	}
	gen := func(model string) *apptest.Resp {
		return a.Do(apptest.Request{Method: "POST", Path: "/api/ai/generate", Body: map[string]any{"prompt": "hi", "model": model},
			Header: map[string]string{"X-API-Key": k.Key}, SkipSync: true})
	}

	fail(http.StatusNotFound, `{"error":{"message":"The model `+"`nope`"+` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`)
	r := gen("nope")
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.False(t, r.Env.Success, "our envelope")
	assert.Equal(t, "The AI upstream refused the request (404): The model `nope` does not exist or you do not have access to it.", r.Env.Message)
	require.Len(t, r.Env.Errors, 1, string(r.Raw))
	assert.Equal(t, "model", r.Env.Errors[0].Field)

	// Ollama's shape, a 400 naming no parameter.
	fail(http.StatusBadRequest, `{"error":"model 'nope' not found"}`)
	r = gen("nope")
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.Equal(t, "The AI upstream refused the request (400): model 'nope' not found", r.Env.Message)

	// A 422 quoting our key, with control and bidi characters, and very long.
	fail(http.StatusUnprocessableEntity, fmt.Sprintf(`{"error":{"message":"bad\nrequest \u001b[31m %s \u202e%s","param":"temperature"}}`, upstreamKey, strings.Repeat("x", 5000)))
	r = gen("fake-model")
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.NotContains(t, string(r.Raw), upstreamKey)
	assert.True(t, strings.HasPrefix(r.Env.Message, "The AI upstream refused the request (422): bad request [31m [redacted] x"), r.Env.Message)
	assert.False(t, strings.ContainsAny(r.Env.Message, "\n\u001b\u202e"), r.Env.Message)
	assert.Less(t, utf8.RuneCountInString(r.Env.Message), 400, "capped")
	require.Len(t, r.Env.Errors, 1)
	assert.Equal(t, "temperature", r.Env.Errors[0].Field)

	// vLLM's shape, a 404 without a code: the model is what was not found.
	fail(http.StatusNotFound, `{"object":"error","message":"The model `+"`nope`"+` does not exist.","type":"NotFoundError","param":null,"code":404}`)
	r = gen("nope")
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.Equal(t, "The AI upstream refused the request (404): The model `nope` does not exist.", r.Env.Message)
	assert.Equal(t, []string{"model"}, r.Fields())

	// Not a JSON error (a wrong Ai:BaseUrl, a proxy's page): the upstream failing, not the input.
	fail(http.StatusNotFound, `<html>not here</html>`)
	r = gen("nope")
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))

	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		fail(status, "")
		r = gen("fake-model")
		assert.Equal(t, http.StatusBadGateway, r.Status, "%d: the gateway's key refused: %s", status, r.Raw)
		assert.NotContains(t, string(r.Raw), upstreamKey)
	}
}

// TestOnlyGenerationsAreMetered: one rule on both routes, a request counts when the client got
// the upstream's generation (a 2xx). An upstream 500 counted on /api/ai/generate but not on the
// pass-through, a 429 or 404 counted on both, and a stream answered with a 200 that is no stream
// was relayed as 200 and charged an estimated 8 prompt tokens.
func TestOnlyGenerationsAreMetered(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	set := func(fail int, ignoreStream bool) {
		up.Set(func(b *aikeystest.Behaviour) { b.Fail, b.IgnoreStream = fail, ignoreStream })
	}
	for _, fail := range []int{http.StatusInternalServerError, http.StatusTooManyRequests, http.StatusNotFound} {
		set(fail, false)
		r := generate(a, k.Key)
		assert.NotEqual(t, http.StatusOK, r.Status, fail)
		for _, stream := range []bool{false, true} {
			res := chat(t, a, "X-API-Key", k.Key, stream)
			res.Body.Close()
			assert.NotEqual(t, http.StatusOK, res.StatusCode, "%d stream=%v", fail, stream)
		}
	}

	set(0, true)
	res, body := chatRaw(t, a, k.Key, streamBody(nil))
	assert.Equal(t, http.StatusBadGateway, res.StatusCode, body)
	var oe openAIError
	require.NoError(t, json.Unmarshal([]byte(body), &oe), body)
	assert.Equal(t, "upstream_not_streaming", oe.Error.Code)
	assert.Equal(t, "server_error", oe.Error.Type)

	set(0, false)
	require.Equal(t, http.StatusOK, generate(a, k.Key).Status) // 11 + 2 tokens
	res = chat(t, a, "X-API-Key", k.Key, false)                // 11 + 2
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	res, body = chatRaw(t, a, k.Key, streamBody(nil)) // 7 + 2
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	var got keyView
	require.Eventually(t, func() bool {
		var ks []keyView
		a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
		got = ks[0]
		return got.Usage.Requests >= 3
	}, 5*time.Second, 100*time.Millisecond)
	// Everything before the three generations was flushed with them or before them.
	assert.EqualValues(t, 3, got.Usage.Requests, "only the three generations count")
	assert.EqualValues(t, 29, got.Usage.PromptTokens)
	assert.EqualValues(t, 6, got.Usage.CompletionTokens)
}
