package aikeys_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/modules/aikeys/aikeystest"
	"provisioner/platform/testutil"
)

// TestStreamTimeoutIsIdleTime: Ai:TimeoutSeconds bounds the wait between chunks, not the stream:
// a slow but steady stream longer than it completes; one that stalls longer ends with an OpenAI
// error event (SDKs raise) and no [DONE].
func TestStreamTimeoutIsIdleTime(t *testing.T) {
	t.Parallel()
	a, up := setup(t, map[string]any{"Ai:TimeoutSeconds": 1})
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	up.Set(func(b *aikeystest.Behaviour) { b.Ticks, b.Tick = 4, 400*time.Millisecond }) // 1.6 s in all
	start := time.Now()
	res, body := chatRaw(t, a, k.Key, streamBody(nil))
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Greater(t, time.Since(start), 1500*time.Millisecond)
	assert.Equal(t, 4, strings.Count(body, `"content":"."`), "every chunk relayed")
	assert.Contains(t, body, "data: [DONE]", "a steady stream longer than the timeout completes")
	assert.NotContains(t, body, `"error"`)

	up.Set(func(b *aikeystest.Behaviour) { b.Ticks, b.Release = 0, make(chan struct{}) }) // the first chunk, then nothing
	res, body = chatRaw(t, a, k.Key, streamBody(nil))
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, body, `"Hel"`)
	assert.NotContains(t, body, "[DONE]")
	var ev openAIError
	for _, line := range strings.Split(body, "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(data, `"error"`) {
			require.NoError(t, json.Unmarshal([]byte(data), &ev), data)
		}
	}
	assert.Equal(t, "upstream_timeout", ev.Error.Code, "a stalled stream ends with an error event: %q", body)
	assert.Equal(t, "server_error", ev.Error.Type)
	assert.True(t, strings.HasSuffix(body, "\n\n"), "the error event is a whole event")
}

// TestUsageChunkOnlyForClientsThatAsked: the gateway asks the upstream for the usage chunk to
// meter streams; a client that did not ask (absent, false, null options) does not get it.
func TestUsageChunkOnlyForClientsThatAsked(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	for name, extra := range map[string]map[string]any{
		"absent":       nil,
		"false":        {"stream_options": map[string]any{"include_usage": false}},
		"null options": {"stream_options": nil},
	} {
		res, body := chatRaw(t, a, k.Key, streamBody(extra))
		require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", name, body)
		assert.NotContains(t, body, `"usage"`, name)
		assert.NotContains(t, body, `"choices":[]`, name)
		assert.Contains(t, body, "data: [DONE]", name)
		assert.NotContains(t, body, "\n\n\n", "%s: no empty event left behind", name)
	}
	res, body := chatRaw(t, a, k.Key, streamBody(map[string]any{"stream_options": map[string]any{"include_usage": true}}))
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, body, `"usage":{"prompt_tokens":7`, "relayed to a client that asked")
	require.Eventually(t, func() bool {
		var ks []keyView
		a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
		return len(ks) == 1 && ks[0].Usage.Requests == 4 && ks[0].Usage.PromptTokens == 28 && ks[0].Usage.CompletionTokens == 8
	}, 5*time.Second, 100*time.Millisecond, "every stream metered from the usage chunk")
}

// TestUsageOnAContentChunk: an upstream that puts the usage on its last content chunk (no chunk
// of its own): a client that did not ask gets that chunk without the usage, one that asked gets
// it whole, and both are metered from it.
func TestUsageOnAContentChunk(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	up.Set(func(b *aikeystest.Behaviour) { b.UsageInLast = true })
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	res, body := chatRaw(t, a, k.Key, streamBody(nil))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	assert.NotContains(t, body, `"usage"`, "not relayed to a client that did not ask")
	assert.Contains(t, body, `"finish_reason":"stop"`, "the chunk itself is relayed")
	assert.Contains(t, body, "data: [DONE]")
	for _, line := range strings.Split(body, "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
			assert.True(t, json.Valid([]byte(data)), "every event is JSON: %q", data)
		}
	}
	res, body = chatRaw(t, a, k.Key, streamBody(map[string]any{"stream_options": map[string]any{"include_usage": true}}))
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, body, `"finish_reason":"stop"}],"usage":{"prompt_tokens":7`, "relayed whole to a client that asked")
	require.Eventually(t, func() bool {
		var ks []keyView
		a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
		return len(ks) == 1 && ks[0].Usage.Requests == 2 && ks[0].Usage.PromptTokens == 14 && ks[0].Usage.CompletionTokens == 4
	}, 5*time.Second, 100*time.Millisecond, "both streams metered from the usage")
}

// TestUpstreamRateLimitAndBadMessages: generate relays the upstream's 429 with its Retry-After;
// the pass-through refuses messages that are not a non-empty array, in OpenAI's format.
func TestUpstreamRateLimitAndBadMessages(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	up.Set(func(b *aikeystest.Behaviour) { b.Fail = http.StatusTooManyRequests })
	r := generate(a, k.Key)
	assert.Equal(t, http.StatusTooManyRequests, r.Status, string(r.Raw))
	assert.Equal(t, "7", r.Header.Get("Retry-After"))
	assert.False(t, r.Env.Success, "our envelope")
	up.Set(func(b *aikeystest.Behaviour) { b.Fail = 0 })
	served := up.Served()

	for name, body := range map[string]string{
		"null":      `{"messages":null}`,
		"object":    `{"messages":{"role":"user"}}`,
		"string":    `{"messages":"hi"}`,
		"empty":     `{"messages":[ ]}`,
		"missing":   `{"model":"x"}`,
		"not JSON":  `{"messages":`,
		"JSON null": `null`,
		// A stream flag that is not a boolean went upstream as it was, and the answer was
		// relayed unmetered as a non-streamed one.
		"stream as a string":         `{"messages":[{"role":"user","content":"hi"}],"stream":"yes"}`,
		"stream as a number":         `{"messages":[{"role":"user","content":"hi"}],"stream":1}`,
		"stream_options as a string": `{"messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":"x"}`,
		"model as a number":          `{"messages":[{"role":"user","content":"hi"}],"model":123}`,
	} {
		res, raw := chatRaw(t, a, k.Key, []byte(body))
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, "%s: %s", name, raw)
		var oe openAIError
		require.NoError(t, json.Unmarshal([]byte(raw), &oe), name)
		assert.Equal(t, "invalid_request_error", oe.Error.Type, name)
		assert.NotEmpty(t, oe.Error.Message, name)
	}
	assert.Equal(t, served, up.Served(), "none reached the upstream")
}

// TestPassthroughErrorsAreOpenAIFormat: the errors the server raises around the pass-through
// (method not allowed, body too large, no such route) are in OpenAI's format too; elsewhere the
// envelope stays.
func TestPassthroughErrorsAreOpenAIFormat(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	check := func(res *http.Response, raw string, status int, code string) {
		t.Helper()
		assert.Equal(t, status, res.StatusCode, raw)
		var oe map[string]map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &oe), raw)
		require.Contains(t, oe, "error", raw)
		assert.Equal(t, code, oe["error"]["code"], raw)
		for _, f := range []string{"message", "type", "param", "code"} {
			assert.Contains(t, oe["error"], f, raw)
		}
		assert.NotContains(t, raw, `"success"`)
	}
	send := func(method, path string, body []byte) (*http.Response, string) {
		req, err := http.NewRequest(method, a.URL+path, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+k.Key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res, string(raw)
	}
	res, raw := send("GET", "/api/ai/v1/chat/completions", nil)
	check(res, raw, http.StatusMethodNotAllowed, "method_not_allowed")
	assert.Equal(t, "OPTIONS, POST", res.Header.Get("Allow"))
	// Over 1 MiB, the whole body sent before the answer is read, as the OpenAI SDKs do.
	res, raw = testutil.Upload(t, a.URL, "POST", "/api/ai/v1/chat/completions",
		map[string]string{"Authorization": "Bearer " + k.Key, "Content-Type": "application/json"}, 8<<20)
	check(res, raw, http.StatusRequestEntityTooLarge, "request_too_large")
	res, raw = send("POST", "/api/ai/v1/embeddings", []byte(`{}`))
	check(res, raw, http.StatusNotFound, "unknown_url")
	res, raw = send("POST", "/api/ai/v1/chat/completions", []byte(`[]`))
	check(res, raw, http.StatusBadRequest, "invalid_json")

	res, raw = send("GET", "/api/ai/generate", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode)
	assert.Contains(t, raw, `"success":false`, "the envelope elsewhere")
	res, raw = testutil.Upload(t, a.URL, "POST", "/api/ai/generate",
		map[string]string{"X-API-Key": k.Key, "Content-Type": "application/json"}, 8<<20)
	assert.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, raw)
	assert.Contains(t, raw, `"success":false`)
}

// TestRelayedRefusalNeverShowsOurUpstreamKey: the pass-through relays an upstream 4xx as the
// upstream wrote it, and an upstream (or a proxy before it) may quote the Authorization it got:
// our Ai:ApiKey then reached the client. Streamed or not, it is redacted, the rest kept.
func TestRelayedRefusalNeverShowsOurUpstreamKey(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	up.Set(func(b *aikeystest.Behaviour) {
		b.Fail = http.StatusUnprocessableEntity
		b.FailBody = `{"error":{"message":"bad temperature (request had Authorization: Bearer ` + upstreamKey + `)","type":"invalid_request_error","param":"temperature","code":null}}`
	})
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"temperature":9}`,
		`{"messages":[{"role":"user","content":"hi"}],"temperature":9,"stream":true}`,
	} {
		res, raw := chatRaw(t, a, k.Key, []byte(body))
		assert.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, raw)
		assert.NotContains(t, raw, upstreamKey)
		var oe openAIError
		require.NoError(t, json.Unmarshal([]byte(raw), &oe), raw)
		assert.Equal(t, "bad temperature (request had Authorization: Bearer [redacted])", oe.Error.Message)
	}
}

// TestStreamNeverShowsOurUpstreamKey: every line of a relayed stream is redacted, not only a
// refusal: an upstream that quotes our Ai:ApiKey in an error event, the key cut across two of its
// writes (two reads for the gateway), or JSON-escaped in a content chunk, hands the client
// [redacted] instead, the rest of the stream as the upstream wrote it.
func TestStreamNeverShowsOurUpstreamKey(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	first := `data: {"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"content":"Hel"}}]}` + "\n\n"
	content := `data: {"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"content":"key: %s"}}]}` + "\n\n"
	errEvent := `data: {"error":{"message":"Incorrect API key provided: %s","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}` + "\n\n"
	cut := strings.Index(errEvent, "%s") + 8 // inside the key: "upstream" | "-secret"
	full := fmt.Sprintf(errEvent, upstreamKey)
	up.Set(func(b *aikeystest.Behaviour) {
		b.StreamWrites = []string{
			first,
			fmt.Sprintf(content, `upstream\u002Dsecret-key`) + full[:cut],
			full[cut:],
		}
	})
	res := chat(t, a, "X-API-Key", k.Key, true)
	require.Equal(t, http.StatusOK, res.StatusCode)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	body := string(raw)
	assert.NotContains(t, body, "secret", "no part of the key")
	assert.Equal(t, first+fmt.Sprintf(content, "[redacted]")+fmt.Sprintf(errEvent, "[redacted]"), body, "the rest intact")
}

// TestEscapedUpstreamKeyIsRedacted: a JSON encoder may escape any character of our Ai:ApiKey
// (`\u002d` for its "-", or every one of them); written so in a relayed 4xx (streamed request or
// not), in a relayed answer, or in the text /api/ai/generate answers, the client still gets
// [redacted], never the key once its JSON is decoded.
func TestEscapedUpstreamKeyIsRedacted(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	var every strings.Builder
	for _, r := range upstreamKey {
		fmt.Fprintf(&every, `\u%04x`, r)
	}
	up.Set(func(b *aikeystest.Behaviour) {
		b.Fail = http.StatusUnprocessableEntity
		b.FailBody = `{"error":{"message":"bad temperature (Authorization: Bearer upstream\u002Dsecret-key, or ` + every.String() + `)","type":"invalid_request_error","param":"temperature","code":null}}`
	})
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"temperature":9}`,
		`{"messages":[{"role":"user","content":"hi"}],"temperature":9,"stream":true}`,
	} {
		res, raw := chatRaw(t, a, k.Key, []byte(body))
		assert.Equal(t, http.StatusUnprocessableEntity, res.StatusCode, raw)
		var oe openAIError
		require.NoError(t, json.Unmarshal([]byte(raw), &oe), raw)
		assert.Equal(t, "bad temperature (Authorization: Bearer [redacted], or [redacted])", oe.Error.Message, body)
	}

	up.Set(func(b *aikeystest.Behaviour) {
		b.Fail = 0
		b.OKBody = `{"id":"chatcmpl-1","object":"chat.completion","model":"fake-model","choices":[{"index":0,"message":{"role":"assistant","content":"the key is upstream\u002dsecret-key"},"finish_reason":"stop"}]}`
	})
	res, raw := chatRaw(t, a, k.Key, []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	require.Equal(t, http.StatusOK, res.StatusCode, raw)
	var cc struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &cc), raw)
	require.Len(t, cc.Choices, 1)
	assert.Equal(t, "the key is [redacted]", cc.Choices[0].Message.Content, "a relayed answer")
	r := generate(a, k.Key)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.NotContains(t, string(r.Raw), upstreamKey)
	assert.Contains(t, string(r.Raw), `"text":"the key is [redacted]"`, "generate's text")
}

// TestCompressedChatBodyIsRefused: a gzip body of a few KB inflating to 20 MB passed the 1 MiB
// limit (it counts compressed bytes) and was inflated and forwarded upstream. Any
// Content-Encoding but identity is a 415 in OpenAI's format, and nothing reaches the upstream.
func TestCompressedChatBodyIsRefused(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, _ = w.Write([]byte(`{"messages":[{"role":"user","content":"hi"}]`))
	_, _ = w.Write(bytes.Repeat([]byte(" "), 20<<20))
	_, _ = w.Write([]byte(`}`))
	require.NoError(t, w.Close())
	require.Less(t, gz.Len(), 1<<20)
	send := func(body []byte, encoding string) (*http.Response, string) {
		req, err := http.NewRequest("POST", a.URL+"/api/ai/v1/chat/completions", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+k.Key)
		req.Header.Set("Content-Type", "application/json")
		if encoding != "" {
			req.Header.Set("Content-Encoding", encoding)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return res, string(raw)
	}
	res, raw := send(gz.Bytes(), "gzip")
	assert.Equal(t, http.StatusUnsupportedMediaType, res.StatusCode, raw)
	var oe openAIError
	require.NoError(t, json.Unmarshal([]byte(raw), &oe), raw)
	assert.Equal(t, "unsupported_encoding", oe.Error.Code, raw)
	assert.Equal(t, "invalid_request_error", oe.Error.Type, raw)
	assert.Contains(t, oe.Error.Message, "Content-Encoding")
	assert.Equal(t, "identity", res.Header.Get("Accept-Encoding"))
	assert.Zero(t, up.Served(), "nothing was forwarded")

	res, raw = send([]byte(`{"messages":[{"role":"user","content":"hi"}]}`), "identity")
	assert.Equal(t, http.StatusOK, res.StatusCode, "identity is no coding: %s", raw)

	// A body declared as UTF-16 is refused too, with a code of its own, and not forwarded.
	served := up.Served()
	req, err := http.NewRequest("POST", a.URL+"/api/ai/v1/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+k.Key)
	req.Header.Set("Content-Type", "application/json; charset=utf-16")
	res, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, http.StatusUnsupportedMediaType, res.StatusCode, string(body))
	oe = openAIError{}
	require.NoError(t, json.Unmarshal(body, &oe), string(body))
	assert.Equal(t, "unsupported_charset", oe.Error.Code, string(body))
	assert.Contains(t, oe.Error.Message, "utf-16")
	assert.Equal(t, served, up.Served(), "nothing was forwarded")
}

// TestStreamDataLinesWithoutSpace: in server-sent events the space after "data:" is optional
// (some OpenAI-compatible servers write "data:{…}"). Such a stream is metered from its usage chunk,
// whose chunk a client that did not ask for it does not get, and its [DONE] ends it; the gateway
// read only "data: " lines, so it metered the prompt's estimate and no completion token, and
// relayed the usage chunk (choices: []) to clients that had not asked for it.
func TestStreamDataLinesWithoutSpace(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	answerWith(up, "", []string{
		`data:{"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"content":"Hel"}}]}` + "\n\n",
		`data:{"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}` + "\n\n",
		`data:{"id":"c","object":"chat.completion.chunk","model":"fake-model","choices":[],"usage":{"prompt_tokens":70,"completion_tokens":20,"total_tokens":90}}` + "\n\n",
		"data:[DONE]\n\n",
	})
	res, body := chatRaw(t, a, k.Key, streamBody(nil))
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	assert.Contains(t, body, `"content":"lo"`)
	assert.NotContains(t, body, `"usage"`, "the usage chunk is not relayed to a client that did not ask")
	assert.Contains(t, body, "[DONE]")
	got := waitUsage(t, a, u.Token, k.ID, 1)
	assert.EqualValues(t, 70, got.Usage.PromptTokens, "metered from the usage chunk")
	assert.EqualValues(t, 20, got.Usage.CompletionTokens, "metered from the usage chunk")
}
