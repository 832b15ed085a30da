package aikeys_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestKeyPolicyNarrowsThePlatforms: a key's allowedModels and maxTokensPerRequest, set at create
// and by PATCH, narrow the platform's caps; a budget set by PATCH holds from the next request, and
// the platform's limits bound what a policy may say.
func TestKeyPolicyNarrowsThePlatforms(t *testing.T) {
	t.Parallel()
	a, up := setup(t, map[string]any{"Ai:AllowedModels": "fake-model,small-model", "Ai:MaxTokensPerRequest": 1000})
	u := a.Register(t)
	k := newKey(t, a, u.Token, map[string]any{"name": "narrow", "policy": map[string]any{"allowedModels": []string{"small-model"}, "maxTokensPerRequest": 50}})
	msgs := []map[string]string{{"role": "user", "content": "hi"}}
	res, body := chatRaw(t, a, k.Key, map[string]any{"model": "fake-model", "messages": msgs})
	assert.Equal(t, http.StatusBadRequest, res.StatusCode, "outside the key's models: %s", body)
	res, body = chatRaw(t, a, k.Key, map[string]any{"model": "small-model", "max_tokens": 900, "messages": msgs})
	require.Equal(t, http.StatusOK, res.StatusCode, body)
	assert.EqualValues(t, 50, up.Bodies()[0]["max_tokens"], "the key's cap")

	patch := func(body map[string]any) *apptest.Resp {
		return a.Do(apptest.Request{Method: http.MethodPatch, Path: fmt.Sprintf("/api/me/ai-keys/%d", k.ID), Token: u.Token, Body: body})
	}
	r := patch(map[string]any{"allowedModels": []string{"big-model"}})
	assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.Equal(t, []string{"allowedModels"}, r.Fields())
	r = patch(map[string]any{"maxTokensPerRequest": 1001})
	assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.Equal(t, []string{"maxTokensPerRequest"}, r.Fields())

	r = patch(map[string]any{"allowedModels": []string{}, "requestBudget": 1, "budgetPeriod": "day"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var kv struct {
		Policy struct {
			AllowedModels       []string `json:"allowedModels"`
			MaxTokensPerRequest *int     `json:"maxTokensPerRequest"`
			RequestBudget       *int64   `json:"requestBudget"`
			BudgetPeriod        string   `json:"budgetPeriod"`
		} `json:"policy"`
	}
	r.Decode(t, &kv)
	v := kv.Policy
	assert.Empty(t, v.AllowedModels)
	require.NotNil(t, v.MaxTokensPerRequest)
	assert.Equal(t, 50, *v.MaxTokensPerRequest, "left out: kept")
	assert.Equal(t, "day", v.BudgetPeriod)
	res, body = chatRaw(t, a, k.Key, map[string]any{"model": "fake-model", "messages": msgs})
	assert.Equal(t, http.StatusOK, res.StatusCode, "every platform model again: %s", body)
	res, body = chatRaw(t, a, k.Key, map[string]any{"model": "fake-model", "messages": msgs})
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode, "the budget of 1 request a day: %s", body)
	assert.NotEmpty(t, res.Header.Get("Retry-After"))

	r = patch(map[string]any{"requestBudget": 0})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	res, body = chatRaw(t, a, k.Key, map[string]any{"model": "fake-model", "messages": msgs})
	assert.Equal(t, http.StatusOK, res.StatusCode, "0 clears the budget: %s", body)

	other := a.Register(t)
	r = a.Do(apptest.Request{Method: http.MethodPatch, Path: fmt.Sprintf("/api/me/ai-keys/%d", k.ID), Token: other.Token, Body: map[string]any{"requestBudget": 5}})
	assert.Equal(t, http.StatusNotFound, r.Status, "another user's key")
}

// TestDefaultMonthlyTokenBudget: a new key gets AiKeys:DefaultMonthlyTokenBudget unless its create
// names a tokenBudget (0: none).
func TestDefaultMonthlyTokenBudget(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, map[string]any{"AiKeys:DefaultMonthlyTokenBudget": 500})
	u := a.Register(t)
	type policy struct {
		TokenBudget  *int64 `json:"tokenBudget"`
		BudgetPeriod string `json:"budgetPeriod"`
	}
	var kv struct {
		Policy policy `json:"policy"`
	}
	r := a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "default"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	r.Decode(t, &kv)
	p := kv.Policy
	require.NotNil(t, p.TokenBudget)
	assert.Equal(t, policy{TokenBudget: p.TokenBudget, BudgetPeriod: "month"}, p)
	assert.Equal(t, int64(500), *p.TokenBudget)
	kv.Policy = policy{}
	r = a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "unbounded", "policy": map[string]any{"tokenBudget": 0}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	r.Decode(t, &kv)
	p = kv.Policy
	assert.Nil(t, p.TokenBudget)
	assert.Equal(t, "none", p.BudgetPeriod)
}

// TestAdminSetsAUsersKeyPolicy: PATCH /api/users/{userId}/ai-keys/{id} changes another user's key
// policy for admins (403 for users, 404 for a key of someone else), audited as about the owner by
// the admin; an admin's aiMonthlyTokenBudget on PUT /api/users/{id} refuses the user's keys at
// the ceiling from the next request, and 0 clears it.
func TestAdminSetsAUsersKeyPolicy(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u, other := a.Register(t), a.Register(t)
	k := newKey(t, a, u.Token, nil)
	admin := a.AdminToken(t)
	patch := func(token string, userID int64, body map[string]any) *apptest.Resp {
		return a.Do(apptest.Request{Method: http.MethodPatch, Path: fmt.Sprintf("/api/users/%d/ai-keys/%d", userID, k.ID), Token: token, Body: body})
	}
	r := patch(u.Token, u.ID, map[string]any{"requestBudget": 1})
	assert.Equal(t, http.StatusForbidden, r.Status, string(r.Raw))
	r = patch(admin, other.ID, map[string]any{"requestBudget": 1})
	assert.Equal(t, http.StatusNotFound, r.Status, "not the key of that user: %s", string(r.Raw))
	r = patch(admin, u.ID, map[string]any{"requestBudget": 1, "budgetPeriod": "day"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var kv struct {
		Policy struct {
			RequestBudget *int64 `json:"requestBudget"`
		} `json:"policy"`
	}
	r.Decode(t, &kv)
	require.NotNil(t, kv.Policy.RequestBudget)
	assert.Equal(t, int64(1), *kv.Policy.RequestBudget)

	r = a.Get(fmt.Sprintf("/api/audit-events?action=aikey.policy_changed&userId=%d", u.ID), admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var events struct {
		Items []struct {
			UserID      int64          `json:"userId"`
			ActorUserID int64          `json:"actorUserId"`
			Details     map[string]any `json:"details"`
		} `json:"items"`
	}
	r.Decode(t, &events)
	require.Len(t, events.Items, 1)
	assert.NotEqual(t, u.ID, events.Items[0].ActorUserID, "the admin changed it")
	assert.EqualValues(t, 1, events.Items[0].Details["requestBudget"])

	// The user's ceiling: a key without a budget of its own is refused once the month's tokens
	// would pass it (a generate's worst case is 24 + the 10 max tokens).
	k2 := newKey(t, a, u.Token, map[string]any{"name": "free"})
	put := func(budget int64) {
		r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin,
			Body: map[string]any{"aiMonthlyTokenBudget": budget}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	}
	put(40)
	r = a.Get(fmt.Sprintf("/api/audit-events?action=user.updated&userId=%d", u.ID), admin)
	assert.Contains(t, string(r.Raw), `"aiMonthlyTokenBudget":{"from":null,"to":40}`, "audited")
	require.Equal(t, http.StatusOK, generate(a, k2.Key).Status)
	r = generate(a, k2.Key)
	require.Equal(t, http.StatusTooManyRequests, r.Status, string(r.Raw))
	assert.Contains(t, r.Env.Message, "Monthly token budget of this user reached: 40 tokens")
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	put(0)
	r = a.Get(fmt.Sprintf("/api/users/%d", u.ID), admin)
	assert.Contains(t, string(r.Raw), `"aiMonthlyTokenBudget":null`)
	assert.Equal(t, http.StatusOK, generate(a, k2.Key).Status, "no ceiling any more")
}
