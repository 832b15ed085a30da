package aikeys_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestCapsHoldOnBothRoutes: the attacker's request of issue 32 (an expensive model, a huge
// max_tokens, many choices, someone else's user) never reaches the upstream as sent: the model is
// refused unless allowed, max_tokens is capped (and the answer says so), n past Ai:MaxChoices is
// refused, and `user` is the key's owner.
func TestCapsHoldOnBothRoutes(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	owner := strconv.FormatInt(u.ID, 10)
	gen := func(body map[string]any) *apptest.Resp {
		return a.Do(apptest.Request{Method: "POST", Path: "/api/ai/generate", Body: body, Header: map[string]string{"X-API-Key": k.Key}, SkipSync: true})
	}
	last := func() map[string]any { b := up.Bodies(); require.NotEmpty(t, b); return b[len(b)-1] }

	// generate: a model outside Ai:AllowedModels (empty: Ai:DefaultModel only) is a 400 naming it.
	r := gen(map[string]any{"prompt": "hi", "model": "gpt-4-32k-most-expensive"})
	assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.Equal(t, []string{"model"}, r.Fields())
	assert.Equal(t, 0, up.Served(), "not sent upstream")

	r = gen(map[string]any{"prompt": "hi", "maxTokens": 60000})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, "4096", r.Header.Get("X-AI-Max-Tokens"), "the answer says the cap")
	assert.EqualValues(t, 4096, last()["max_tokens"])
	assert.Equal(t, owner, last()["user"])
	assert.Equal(t, "fake-model", last()["model"])

	r = gen(map[string]any{"prompt": "hi"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.EqualValues(t, 4096, last()["max_tokens"], "a missing max_tokens is the cap")
	r = gen(map[string]any{"prompt": "hi", "maxTokens": 10})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.EqualValues(t, 10, last()["max_tokens"], "a smaller one is kept")
	assert.Equal(t, "10", r.Header.Get("X-AI-Max-Tokens"))

	// The pass-through: the same request as the attacker, then its parts one by one.
	msgs := []map[string]string{{"role": "user", "content": "hi"}}
	served := up.Served()
	res, body := chatRaw(t, a, k.Key, map[string]any{"model": "gpt-4-32k-most-expensive", "max_tokens": 1000000, "n": 128, "messages": msgs})
	assert.Equal(t, http.StatusBadRequest, res.StatusCode, body)
	var oe openAIError
	require.NoError(t, json.Unmarshal([]byte(body), &oe))
	assert.Equal(t, "model", param(oe))
	res, body = chatRaw(t, a, k.Key, map[string]any{"max_tokens": 1000000, "n": 2, "messages": msgs})
	assert.Equal(t, http.StatusBadRequest, res.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), &oe))
	assert.Equal(t, "n", param(oe))
	assert.Equal(t, "too_many_choices", oe.Error.Code)
	assert.Equal(t, served, up.Served(), "nothing refused was sent upstream")

	res, body = chatRaw(t, a, k.Key, map[string]any{"max_tokens": 1000000, "n": 1, "user": "someone-else", "messages": msgs})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	assert.Equal(t, "4096", res.Header.Get("X-AI-Max-Tokens"))
	assert.EqualValues(t, 4096, last()["max_tokens"])
	assert.Equal(t, owner, last()["user"], "the client's user is replaced")
	assert.Equal(t, "fake-model", last()["model"], "the default model filled in")

	res, body = chatRaw(t, a, k.Key, map[string]any{"max_completion_tokens": 50, "stream": true, "messages": msgs})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	assert.EqualValues(t, 50, last()["max_completion_tokens"])
	assert.NotContains(t, last(), "max_tokens", "max_completion_tokens alone, as the client sent it")
	assert.Equal(t, owner, last()["user"])

	res, body = chatRaw(t, a, k.Key, map[string]any{"max_tokens": 1.5, "messages": msgs})
	assert.Equal(t, http.StatusBadRequest, res.StatusCode, body)
	require.NoError(t, json.Unmarshal([]byte(body), &oe))
	assert.Equal(t, "max_tokens", param(oe))
}

// TestAllowedModelsList: Ai:AllowedModels lists the models a request may name; `*` allows any.
func TestAllowedModelsList(t *testing.T) {
	t.Parallel()
	a, up := setup(t, map[string]any{"Ai:AllowedModels": "fake-model,small-model", "Ai:MaxChoices": 2, "Ai:MaxTokensPerRequest": 100})
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	msgs := []map[string]string{{"role": "user", "content": "hi"}}
	for model, want := range map[string]int{"small-model": 200, "fake-model": 200, "big-model": 400} {
		res, body := chatRaw(t, a, k.Key, map[string]any{"model": model, "n": 2, "messages": msgs})
		assert.Equal(t, want, res.StatusCode, "%s: %s", model, body)
	}
	b := up.Bodies()
	require.Len(t, b, 2)
	assert.EqualValues(t, 100, b[1]["max_tokens"])
	assert.EqualValues(t, 2, b[1]["n"])

	anyModel, up2 := setup(t, map[string]any{"Ai:AllowedModels": "*"})
	u2 := anyModel.Register(t)
	k2 := newKey(t, anyModel, u2.Token, nil)
	res, body := chatRaw(t, anyModel, k2.Key, map[string]any{"model": "anything", "messages": msgs})
	assert.Equal(t, http.StatusOK, res.StatusCode, body)
	assert.Equal(t, "anything", up2.Bodies()[0]["model"])
}

// param is the error's param, "" when null.
func param(oe openAIError) string {
	if oe.Error.Param == nil {
		return ""
	}
	return *oe.Error.Param
}
