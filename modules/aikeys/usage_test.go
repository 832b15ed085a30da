package aikeys_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys/aikeystest"
)

// answerWith makes the fake answer body to non-streamed requests and writes to streamed ones.
func answerWith(up *aikeystest.Upstream, body string, writes []string) {
	up.Set(func(b *aikeystest.Behaviour) { b.OKBody, b.StreamWrites = body, writes })
}

type generation struct {
	Text, Model, FinishReason string
	Usage                     struct{ PromptTokens, CompletionTokens, TotalTokens int64 }
}

func generated(t *testing.T, a *apptest.App, key string) generation {
	t.Helper()
	r := generate(a, key)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var g generation
	r.Decode(t, &g)
	return g
}

// waitUsage waits for the key's usage to show requests requests and answers it.
func waitUsage(t *testing.T, a *apptest.App, token string, id, requests int64) keyView {
	t.Helper()
	var got keyView
	require.Eventually(t, func() bool {
		got = keyUsage(t, a, token, id)
		return got.Usage.Requests >= requests
	}, 5*time.Second, 100*time.Millisecond)
	return got
}

var chatHi = map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}}

// TestUsageFiguresAreSanitised: negative upstream usage was subtracted from the key's usage and
// echoed by /api/ai/generate ("promptTokens": -1000000), on every route, streamed or not, and two
// answers of int64's maximum wrapped the key's usage to -2. Each figure is clamped to
// [0, 1e9] wherever usage is read.
func TestUsageFiguresAreSanitised(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	neg := `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":-1000000,"completion_tokens":-5,"total_tokens":1}}`
	answerWith(up, neg, []string{`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"}}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":-1000000,"completion_tokens":-5,"total_tokens":1}}` + "\n\ndata: [DONE]\n\n"})
	g := generated(t, a, k.Key)
	assert.EqualValues(t, 0, g.Usage.PromptTokens)
	assert.EqualValues(t, 0, g.Usage.CompletionTokens)
	assert.EqualValues(t, 1, g.Usage.TotalTokens)
	res, body := chatRaw(t, a, k.Key, chatHi)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	res, body = chatRaw(t, a, k.Key, streamBody(nil))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	got := waitUsage(t, a, u.Token, k.ID, 3)
	assert.EqualValues(t, 0, got.Usage.PromptTokens, "negative figures count 0")
	assert.EqualValues(t, 0, got.Usage.CompletionTokens, "negative figures count 0")

	answerWith(up, maxUsageAnswer, nil)
	g = generated(t, a, k.Key)
	assert.EqualValues(t, 1_000_000_000, g.Usage.PromptTokens)
	res, body = chatRaw(t, a, k.Key, chatHi)
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	got = waitUsage(t, a, u.Token, k.ID, 5)
	assert.EqualValues(t, 5, got.Usage.Requests)
	assert.EqualValues(t, 2_000_000_000, got.Usage.PromptTokens, "each answer counts at most 1e9")
	assert.EqualValues(t, 2_000_000_000, got.Usage.CompletionTokens)
}

// TestUnusualCompletionsAreRelayed: a 200 JSON object the gateway's struct did not fit was a 502
// upstream_malformed on both routes: "prompt_tokens": 5.0, or a message content given as an
// array of content parts. The pass-through relays any JSON object and meters what it can read;
// /api/ai/generate joins the texts of content parts and counts integral floats.
func TestUnusualCompletionsAreRelayed(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	float := `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":5.0,"completion_tokens":2,"total_tokens":7e0}}`
	parts := `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"hm"}]},{"type":"text","text":"hi"},{"type":"text","text":" there"}]}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`
	for _, body := range []string{float, parts} {
		answerWith(up, body, nil)
		g := generated(t, a, k.Key)
		assert.Contains(t, []string{"hi", "hi there"}, g.Text, body)
		assert.EqualValues(t, 5, g.Usage.PromptTokens, body)
		assert.EqualValues(t, 7, g.Usage.TotalTokens, body)
		res, raw := chatRaw(t, a, k.Key, chatHi)
		require.Equal(t, http.StatusOK, res.StatusCode, raw)
		assert.JSONEq(t, body, raw, "relayed as it is")
	}
	assert.Equal(t, "hi there", generated(t, a, k.Key).Text) // the parts' texts joined

	answerWith(up, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"}}],"usage":"lots"}`, nil)
	res, raw := chatRaw(t, a, k.Key, chatHi)
	require.Equal(t, http.StatusOK, res.StatusCode, raw)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &v))

	got := waitUsage(t, a, u.Token, k.ID, 6)
	assert.EqualValues(t, 6, got.Usage.Requests)
	assert.EqualValues(t, 25, got.Usage.PromptTokens, "an unreadable usage counts 0")
	assert.EqualValues(t, 10, got.Usage.CompletionTokens)
}

// TestGenerateRedactsEveryCopiedField: /api/ai/generate redacted Ai:ApiKey from the text only;
// an upstream naming it in `model` or `finish_reason` had it handed to the client. Every string
// generate copies from the answer is redacted.
func TestGenerateRedactsEveryCopiedField(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	answerWith(up, `{"id":"x","object":"chat.completion","model":"`+upstreamKey+`","choices":[{"index":0,"finish_reason":"upstream\u002dsecret-key","message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`, nil)
	r := generate(a, k.Key)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.NotContains(t, string(r.Raw), upstreamKey)
	var g generation
	r.Decode(t, &g)
	assert.Equal(t, "[redacted]", g.Model)
	assert.Equal(t, "[redacted]", g.FinishReason)
}

// TestStreamsAreNotStored: a streamed answer carried Cache-Control: no-cache (a cache may keep
// it) while every other answer carries no-store, as the README promises. It is no-store.
func TestStreamsAreNotStored(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	res, body := chatRaw(t, a, k.Key, streamBody(nil))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	assert.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
}
