package aikeys_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"
	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys"
	"provisioner/modules/aikeys/aikeystest"
)

// TestFastGenerateAnswersAsTheOperationDoes: POST /api/ai/generate answers plain requests ahead of
// its huma operation (fastGenerate). Every request here is sent twice, once as it comes and once
// with that shortcut off, and the client must get the same answer (status, body, Content-Type,
// Retry-After, which rate-limit headers): bodies at and past every bound of the schema, types,
// nulls, NUL, duplicates, unknown members, invalid UTF-8, Content-Types, every way of presenting a
// key, and the upstream's failures. The plain ones must have been answered by the shortcut, the
// others by the operation.
func TestFastGenerateAnswersAsTheOperationDoes(t *testing.T) {
	a, up := setup(t, map[string]any{"RateLimit:AiGenerate": "100000-M"})
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	revoked := newKey(t, a, u.Token, map[string]any{"name": "revoked"})
	require.Equal(t, http.StatusOK, a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/ai-keys/%d", revoked.ID), Token: u.Token}).Status)
	defer aikeys.FastGenerate(true)

	type answer struct {
		Status                  int
		Body, ContentType, RA   string
		Limit, Remaining, Reset bool
	}
	send := func(ct string, headers [][2]string, body string) answer {
		req, err := http.NewRequest("POST", a.URL+"/api/ai/generate", strings.NewReader(body))
		require.NoError(t, err)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		for _, h := range headers {
			req.Header.Add(h[0], h[1])
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		return answer{res.StatusCode, string(raw), res.Header.Get("Content-Type"), res.Header.Get("Retry-After"),
			res.Header.Get("X-RateLimit-Limit") != "", res.Header.Get("X-RateLimit-Remaining") != "", res.Header.Get("RateLimit") != ""}
	}
	key := [][2]string{{"X-API-Key", k.Key}}
	type tc struct {
		name, ct string
		headers  [][2]string
		body     string
		plain    bool // answered by the shortcut
	}
	long := func(n int, r string) string { return strings.Repeat(r, n) }
	cases := []tc{
		{"minimal", "application/json", key, `{"prompt":"Say hello"}`, true},
		{"every field", "application/json", key, `{"prompt":"Say hello","system":"Be brief","model":"llama3.1:8b-instruct","maxTokens":10,"temperature":0.5}`, true},
		{"charset", "application/json; charset=utf-8", key, `{"prompt":"hi"}`, true},
		{"charset upper case", "Application/JSON; Charset=UTF-8", key, `{"prompt":"hi"}`, true},
		{"the same key twice", "application/json", [][2]string{{"X-API-Key", k.Key}, {"X-API-Key", k.Key}}, `{"prompt":"hi"}`, true},
		{"whole float", "application/json", key, `{"prompt":"hi","maxTokens":100.0}`, true},
		{"exponent", "application/json", key, `{"prompt":"hi","maxTokens":1e2}`, true},
		{"bounds", "application/json", key, `{"prompt":"x","maxTokens":65536,"temperature":2}`, true},
		{"lower bounds", "application/json", key, `{"prompt":"x","maxTokens":1,"temperature":0}`, true},
		{"longest", "application/json", key, `{"prompt":"` + long(200000, "é") + `","system":"` + long(100000, "s") + `","model":"` + long(200, "m") + `"}`, true},
		{"escapes", "application/json", key, `{"prompt":"a\"b\\c\n\u00e9\ud83d\ude00<&>"}`, true},
		{"the word null in a string", "application/json", key, `{"prompt":"null"}`, false},
		{"null member", "application/json", key, `{"prompt":"hi","system":null}`, false},
		{"null maxTokens", "application/json", key, `{"prompt":"hi","maxTokens":null}`, false},
		{"null body", "application/json", key, `null`, false},
		{"NUL", "application/json", key, `{"prompt":"a\u0000b"}`, false},
		{"empty prompt", "application/json", key, `{"prompt":""}`, false},
		{"no prompt", "application/json", key, `{"system":"x"}`, false},
		{"prompt too long", "application/json", key, `{"prompt":"` + long(200001, "é") + `"}`, false},
		{"system too long", "application/json", key, `{"prompt":"x","system":"` + long(100001, "s") + `"}`, false},
		{"model too long", "application/json", key, `{"prompt":"x","model":"` + long(201, "m") + `"}`, false},
		{"model with a bidi override", "application/json", key, `{"prompt":"x","model":"a\u202eb"}`, false},
		{"model with a line feed", "application/json", key, `{"prompt":"x","model":"a\nb"}`, false},
		{"maxTokens 0", "application/json", key, `{"prompt":"x","maxTokens":0}`, false},
		{"maxTokens too big", "application/json", key, `{"prompt":"x","maxTokens":65537}`, false},
		{"maxTokens fraction", "application/json", key, `{"prompt":"x","maxTokens":1.5}`, false},
		{"maxTokens string", "application/json", key, `{"prompt":"x","maxTokens":"10"}`, false},
		{"temperature too high", "application/json", key, `{"prompt":"x","temperature":2.0001}`, false},
		{"temperature negative", "application/json", key, `{"prompt":"x","temperature":-0.1}`, false},
		{"prompt a number", "application/json", key, `{"prompt":5}`, false},
		{"unknown member", "application/json", key, `{"prompt":"x","stream":true}`, false},
		{"member of another case", "application/json", key, `{"Prompt":"x"}`, false},
		{"duplicate member", "application/json", key, `{"prompt":"x","prompt":"y"}`, false},
		{"invalid UTF-8", "application/json", key, "{\"prompt\":\"\xff\"}", false},
		{"not JSON", "application/json", key, `{"prompt":`, false},
		{"an array", "application/json", key, `[{"prompt":"x"}]`, false},
		{"empty body", "application/json", key, ``, false},
		{"no Content-Type", "", key, `{"prompt":"hi"}`, false},
		{"+json", "application/vnd.api+json", key, `{"prompt":"hi"}`, false},
		{"text/plain", "text/plain", key, `{"prompt":"hi"}`, false},
		{"no key", "application/json", nil, `{"prompt":"hi"}`, false},
		{"empty key", "application/json", [][2]string{{"X-API-Key", ""}}, `{"prompt":"hi"}`, false},
		{"two keys", "application/json", [][2]string{{"X-API-Key", k.Key}, {"X-API-Key", revoked.Key}}, `{"prompt":"hi"}`, false},
		{"key as Bearer", "application/json", [][2]string{{"Authorization", "Bearer " + k.Key}}, `{"prompt":"hi"}`, false},
		{"unknown key", "application/json", [][2]string{{"X-API-Key", "sk-prov-unknown"}}, `{"prompt":"hi"}`, true},
		{"revoked key", "application/json", [][2]string{{"X-API-Key", revoked.Key}}, `{"prompt":"hi"}`, true},
		{"a JWT as the key", "application/json", [][2]string{{"X-API-Key", u.Token}}, `{"prompt":"hi"}`, true},
		{"invalid body and unknown key", "application/json", [][2]string{{"X-API-Key", "sk-prov-unknown"}}, `{"prompt":""}`, false},
	}
	check := func(c tc) {
		fast := aikeys.FastGenerate(true)
		got := send(c.ct, c.headers, c.body)
		byShortcut := aikeys.FastGenerate(false) - fast
		want := send(c.ct, c.headers, c.body)
		aikeys.FastGenerate(true)
		assert.Equal(t, want, got, c.name)
		// Refusals of the key are the platform's error handler's either way: counted as not answered by it.
		if c.plain && got.Status == http.StatusOK {
			assert.EqualValues(t, 1, byShortcut, "%s: answered by the shortcut", c.name)
		} else {
			assert.EqualValues(t, 0, byShortcut, "%s: answered by the operation", c.name)
		}
	}
	for _, c := range cases {
		check(c)
	}

	// What the upstream answers, well or not.
	up.Set(func(b *aikeystest.Behaviour) {
		b.OKBody = `{"id":"x","object":"chat.completion","model":"m<&>\u2028","choices":[{"index":0,"message":{"role":"assistant","content":"<b>Tom & \"Jerry\"</b>\u2028\u00e9\ud83d\ude00"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`
	})
	check(tc{"HTML and separators in the answer", "application/json", key, `{"prompt":"hi"}`, true})
	for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadRequest, http.StatusUnprocessableEntity} {
		up.Set(func(b *aikeystest.Behaviour) { b.OKBody, b.Fail = "", status })
		check(tc{"upstream " + http.StatusText(status), "application/json", key, `{"prompt":"hi"}`, true})
	}
	up.Set(func(b *aikeystest.Behaviour) { b.Fail, b.Huge = 0, true })
	check(tc{"upstream answer too large", "application/json", key, `{"prompt":"hi"}`, true})
	up.Set(func(b *aikeystest.Behaviour) { b.Huge, b.DropAll = false, true })
	check(tc{"upstream drops the connection", "application/json", key, `{"prompt":"hi"}`, true})
	up.Set(func(b *aikeystest.Behaviour) { b.DropAll = false })
	assert.NotContains(t, send("application/json", key, `{"prompt":"hi"}`).Body, upstreamKey)
}

// TestGenerateShortcutReadsItsLimitsFromTheSchema: the shortcut takes the body's limits from the
// operation's schema in the OpenAPI document, and stays off for a schema with a rule it does not
// check (a pattern, an enum, a required member that may be empty, an exclusive bound, an unknown
// member), so a change of GenerateInput's tags can never let it accept what the operation refuses.
func TestGenerateShortcutReadsItsLimitsFromTheSchema(t *testing.T) {
	t.Parallel()
	register := func(body any) *huma.OpenAPI {
		cfg := huma.DefaultConfig("t", "1")
		cfg.CreateHooks = nil // as the service's (no $schema member)
		api := humafiber.New(fiber.New(), cfg)
		op := huma.Operation{OperationID: "generate", Method: http.MethodPost, Path: "/api/ai/generate"}
		switch b := body.(type) {
		case aikeys.GenerateInput:
			huma.Register(api, op, func(context.Context, *struct{ Body aikeys.GenerateInput }) (*struct{}, error) { return nil, nil })
		case withPattern:
			huma.Register(api, op, func(context.Context, *struct{ Body withPattern }) (*struct{}, error) { return nil, nil })
		case withEnum:
			huma.Register(api, op, func(context.Context, *struct{ Body withEnum }) (*struct{}, error) { return nil, nil })
		case emptyRequired:
			huma.Register(api, op, func(context.Context, *struct{ Body emptyRequired }) (*struct{}, error) { return nil, nil })
		case exclusive:
			huma.Register(api, op, func(context.Context, *struct{ Body exclusive }) (*struct{}, error) { return nil, nil })
		case oneMore:
			huma.Register(api, op, func(context.Context, *struct{ Body oneMore }) (*struct{}, error) { return nil, nil })
		default:
			t.Fatalf("%T", b)
		}
		return api.OpenAPI()
	}
	require.NoError(t, aikeys.ReadGenerateLimits(register(aikeys.GenerateInput{})))
	for _, body := range []any{withPattern{}, withEnum{}, emptyRequired{}, exclusive{}, oneMore{}} {
		assert.Error(t, aikeys.ReadGenerateLimits(register(body)), "%T", body)
	}
}

type withPattern struct {
	Prompt      string   `json:"prompt" minLength:"1" pattern:"^[a-z]+$"`
	System      string   `json:"system,omitempty"`
	Model       string   `json:"model,omitempty"`
	MaxTokens   *int     `json:"maxTokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
}

type withEnum struct {
	Prompt      string   `json:"prompt" minLength:"1"`
	System      string   `json:"system,omitempty"`
	Model       string   `json:"model,omitempty" enum:"a,b"`
	MaxTokens   *int     `json:"maxTokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
}

type emptyRequired struct {
	Prompt      string   `json:"prompt"`
	System      string   `json:"system,omitempty"`
	Model       string   `json:"model,omitempty"`
	MaxTokens   *int     `json:"maxTokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
}

type exclusive struct {
	Prompt      string   `json:"prompt" minLength:"1"`
	System      string   `json:"system,omitempty"`
	Model       string   `json:"model,omitempty"`
	MaxTokens   *int     `json:"maxTokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty" exclusiveMinimum:"0"`
}

type oneMore struct {
	Prompt      string   `json:"prompt" minLength:"1"`
	System      string   `json:"system,omitempty"`
	Model       string   `json:"model,omitempty"`
	MaxTokens   *int     `json:"maxTokens,omitempty"`
	Temperature *float64 `json:"temperature,omitempty"`
	Stop        string   `json:"stop,omitempty"`
}
