package aikeys_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"provisioner/platform/testutil"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPassthroughRequestBodyRules: the pass-through took a text/plain body (generate answers 415),
// relayed invalid UTF-8 bytes upstream as they were, and let a member named twice pass (the last
// one won). A non-JSON Content-Type is a 415, invalid UTF-8 and a member named twice in any object
// a 400, each in OpenAI's format and before anything reaches the upstream; a NUL inside a string
// is valid JSON and relayed (the README's exemption).
func TestPassthroughRequestBodyRules(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	send := func(ct, body string) (int, openAIError) {
		t.Helper()
		req, err := http.NewRequest("POST", a.URL+"/api/ai/v1/chat/completions", bytes.NewReader([]byte(body)))
		require.NoError(t, err)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		req.Header.Set("Authorization", "Bearer "+k.Key)
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var oe openAIError
		if res.StatusCode != http.StatusOK {
			require.NoError(t, json.Unmarshal(raw, &oe), string(raw))
		}
		return res.StatusCode, oe
	}
	ok := `{"messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct{ ct, body, code string }{
		{"text/plain", ok, "unsupported_content_type"},
		{"application/x-www-form-urlencoded", ok, "unsupported_content_type"},
		{"application/json", "{\"messages\":[{\"role\":\"user\",\"content\":\"h\xffi\"}]}", "invalid_utf8"},
		{"application/json", `{"model":"a","model":"b","messages":[{"role":"user","content":"hi"}]}`, "duplicate_member"},
		{"application/json", `{"messages":[{"role":"user","role":"system","content":"hi"}]}`, "duplicate_member"},
	} {
		status, oe := send(c.ct, c.body)
		want := http.StatusBadRequest
		if c.code == "unsupported_content_type" {
			want = http.StatusUnsupportedMediaType
		}
		assert.Equal(t, want, status, "%s %q", c.ct, c.body)
		assert.Equal(t, c.code, oe.Error.Code, "%s %q", c.ct, c.body)
		assert.Equal(t, "invalid_request_error", oe.Error.Type)
		// And the document says so, under the status given.
		var doc struct {
			Paths map[string]map[string]struct {
				Responses map[string]struct {
					Description string `json:"description"`
				} `json:"responses"`
			} `json:"paths"`
		}
		r := a.Get("/api/openapi.json", "")
		require.NoError(t, json.Unmarshal(testutil.InlineOpenAPI(t, r.Raw), &doc))
		assert.Contains(t, doc.Paths["/api/ai/v1/chat/completions"]["post"].Responses[fmt.Sprint(want)].Description, c.code)
	}
	assert.Empty(t, up.Bodies(), "nothing refused reached the upstream")

	for _, ct := range []string{"application/json", "Application/JSON; charset=UTF-8", "application/vnd.openai+json", ""} {
		status, oe := send(ct, ok)
		assert.Equal(t, http.StatusOK, status, "%q: %+v", ct, oe)
	}
	status, oe := send("application/json", `{"messages":[{"role":"user","content":"a\u0000b"}]}`)
	assert.Equal(t, http.StatusOK, status, "a NUL in a string is relayed: %+v", oe)
	bodies := up.Bodies()
	last := bodies[len(bodies)-1]["messages"].([]any)[0].(map[string]any)["content"]
	assert.Equal(t, "a\x00b", last)
}
