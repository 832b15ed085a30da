package aikeys_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

func TestMain(m *testing.M) { testutil.Main(m) }

const upstreamKey = "upstream-secret-key"

// newUpstream starts the fake upstream expecting upstreamKey, closed when the test ends;
// configure, if given, adjusts its server first (say IdleTimeout).
func newUpstream(t testing.TB, configure ...func(*http.Server)) *aikeystest.Upstream {
	u := aikeystest.New(upstreamKey, configure...)
	t.Cleanup(u.Close)
	return u
}

type keyView struct {
	ID     int64  `json:"id"`
	Key    string `json:"key"`
	Prefix string `json:"prefix"`
	Status string `json:"status"`
	Usage  struct {
		Requests         int64 `json:"requests"`
		PromptTokens     int64 `json:"promptTokens"`
		CompletionTokens int64 `json:"completionTokens"`
	} `json:"usage"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
}

func setup(t *testing.T, extra map[string]any) (*apptest.App, *aikeystest.Upstream) {
	up := newUpstream(t)
	kv := map[string]any{"Ai:BaseUrl": up.URL, "Ai:ApiKey": upstreamKey, "Ai:DefaultModel": "fake-model", "Ai:TimeoutSeconds": 2}
	for k, v := range extra {
		kv[k] = v
	}
	return apptest.Start(t, apptest.With(kv)), up
}

func newKey(t testing.TB, a *apptest.App, token string, body map[string]any) keyView {
	t.Helper()
	if body == nil {
		body = map[string]any{"name": "test key"}
	}
	r := a.Post("/api/me/ai-keys", token, body)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var k keyView
	r.Decode(t, &k)
	return k
}

func generate(a *apptest.App, key string) *apptest.Resp {
	return a.Do(apptest.Request{Method: "POST", Path: "/api/ai/generate", Body: map[string]any{"prompt": "Say hello", "system": "Be brief", "maxTokens": 10},
		Header: map[string]string{"X-API-Key": key}, SkipSync: true})
}

func TestKeyLifecycleAndGenerate(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	assert.True(t, strings.HasPrefix(k.Key, "sk-prov-"))
	assert.GreaterOrEqual(t, len(k.Key), len("sk-prov-")+22, "at least 128 bits")
	assert.True(t, strings.HasPrefix(k.Key, k.Prefix))
	var stored []byte
	require.NoError(t, a.DB.QueryRow("SELECT key_hash FROM ai_keys WHERE id = ?", k.ID).Scan(&stored))
	assert.NotContains(t, string(stored), k.Key, "only a hash is stored")

	list := a.Get("/api/me/ai-keys", u.Token)
	assert.NotContains(t, string(list.Raw), k.Key, "the key text never appears in lists")

	r := generate(a, k.Key)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var g struct {
		Text, Model, FinishReason string
		Usage                     struct{ PromptTokens, CompletionTokens, TotalTokens int64 }
	}
	r.Decode(t, &g)
	assert.Equal(t, "Hello there", g.Text)
	assert.Equal(t, "fake-model", g.Model)
	assert.Equal(t, "stop", g.FinishReason)
	assert.EqualValues(t, 13, g.Usage.TotalTokens)
	bodies := up.Bodies()
	msgs := bodies[0]["messages"].([]any)
	assert.Len(t, msgs, 2, "system and user messages")
	assert.EqualValues(t, 10, bodies[0]["max_tokens"])

	// Usage is flushed in batches and shows on the key.
	require.Eventually(t, func() bool {
		var ks []keyView
		a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
		return len(ks) == 1 && ks[0].Usage.Requests == 1 && ks[0].Usage.PromptTokens == 11 && ks[0].LastUsedAt != nil
	}, 5*time.Second, 100*time.Millisecond)

	// Another user's key: 404 on every management route.
	other := a.Register(t)
	for _, req := range []apptest.Request{
		{Method: "POST", Path: fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID)},
		{Method: "DELETE", Path: fmt.Sprintf("/api/me/ai-keys/%d", k.ID)},
	} {
		req.Token = other.Token
		assert.Equal(t, http.StatusNotFound, a.Do(req).Status)
	}

	// Revoked: refused at once.
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/ai-keys/%d", k.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, http.StatusUnauthorized, generate(a, k.Key).Status)
	assert.Equal(t, http.StatusConflict, a.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID), u.Token, nil).Status)
}

func TestRefusedKeys(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	expiring := newKey(t, a, u.Token, map[string]any{"name": "short", "expiresAt": time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano)})
	require.Equal(t, http.StatusOK, generate(a, expiring.Key).Status)
	time.Sleep(1600 * time.Millisecond)

	cases := map[string]string{
		"unknown":  "sk-prov-" + strings.Repeat("A", 32),
		"expired":  expiring.Key,
		"a JWT":    u.Token,
		"empty":    "",
		"mangled":  expiring.Key[:len(expiring.Key)-1] + "x",
		"too long": "sk-prov-" + strings.Repeat("x", 500),
	}
	for name, key := range cases {
		t.Run(name, func(t *testing.T) {
			r := generate(a, key)
			assert.Equal(t, http.StatusUnauthorized, r.Status, string(r.Raw))
			assert.False(t, r.Env.Success)
		})
	}
	// A live key sent the OpenAI SDKs' way to the X-API-Key route is refused, saying where the key goes
	// rather than calling the key bad.
	live := newKey(t, a, u.Token, map[string]any{"name": "bearer"})
	r := a.Do(apptest.Request{Method: "POST", Path: "/api/ai/generate", Body: map[string]any{"prompt": "Say hello"},
		Header: map[string]string{"Authorization": "Bearer " + live.Key}, SkipSync: true})
	assert.Equal(t, http.StatusUnauthorized, r.Status, string(r.Raw))
	assert.Contains(t, r.Env.Message, "X-API-Key", string(r.Raw))
	assert.NotContains(t, string(r.Raw), live.Key)
	assert.Equal(t, http.StatusBadRequest, a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "past", "expiresAt": "2001-01-01T00:00:00Z"}).Status)
	assert.Equal(t, http.StatusBadRequest, a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": ""}).Status)
}

func TestRotationWithAndWithoutGrace(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	require.Equal(t, http.StatusOK, generate(a, k.Key).Status) // cached on this replica now

	r := a.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID), u.Token, nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var rotated keyView
	r.Decode(t, &rotated)
	assert.Equal(t, k.ID, rotated.ID, "the id carries over")
	assert.NotEqual(t, k.Key, rotated.Key)
	assert.Equal(t, http.StatusUnauthorized, generate(a, k.Key).Status, "the old key stops at once")
	assert.Equal(t, http.StatusOK, generate(a, rotated.Key).Status)

	r = a.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID), u.Token, map[string]any{"gracePeriodSeconds": 2})
	require.Equal(t, http.StatusOK, r.Status)
	var graced keyView
	r.Decode(t, &graced)
	assert.Equal(t, http.StatusOK, generate(a, rotated.Key).Status, "the old key works during the grace period")
	assert.Equal(t, http.StatusOK, generate(a, graced.Key).Status)
	time.Sleep(2100 * time.Millisecond)
	assert.Equal(t, http.StatusUnauthorized, generate(a, rotated.Key).Status, "and stops after it")
	assert.Equal(t, http.StatusOK, generate(a, graced.Key).Status)

	assert.Equal(t, http.StatusBadRequest, a.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID), u.Token, map[string]any{"gracePeriodSeconds": 86401}).Status)

	require.Eventually(t, func() bool {
		var ks []keyView
		a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
		return len(ks) == 1 && ks[0].Usage.Requests == 5
	}, 5*time.Second, 100*time.Millisecond, "usage carries over across rotations")
}

// TestWholeNumbersForIntegerFields: maxTokens 100.0 and gracePeriodSeconds 60.0 are integers for
// the schema (and for JavaScript clients, which may well send them so), but the decoder refused
// them: 400 "cannot be a number".
func TestWholeNumbersForIntegerFields(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	r := a.Do(apptest.Request{Method: "POST", Path: "/api/ai/generate", Body: `{"prompt":"Say hello","maxTokens":100.0}`,
		Header: map[string]string{"X-API-Key": k.Key}, SkipSync: true})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	bodies := up.Bodies()
	assert.Equal(t, float64(100), bodies[len(bodies)-1]["max_tokens"], "relayed as the integer it is")

	r = a.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID), u.Token, `{"gracePeriodSeconds":6e1}`)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, http.StatusOK, generate(a, k.Key).Status, "the old key works during the grace period")

	r = a.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID), u.Token, `{"gracePeriodSeconds":6.5}`)
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.Equal(t, []string{"gracePeriodSeconds"}, r.Fields(), "a fraction is still refused, naming the field")
}

// TestRevocationReachesTheOtherReplica: replica two applies the change feed 150 ms late, yet once
// replica one answered a rotation or a revocation, replica two refuses the old key.
func TestRevocationReachesTheOtherReplica(t *testing.T) {
	t.Parallel()
	prefix := "shared" + testutil.RandomSuffix()
	up := newUpstream(t)
	kv := map[string]any{"Ai:BaseUrl": up.URL, "Ai:ApiKey": upstreamKey, "Redis:KeyPrefix": prefix}
	one := apptest.Start(t, apptest.With(kv))
	two := apptest.Start(t, apptest.With(kv), apptest.WithFeedLag(150*time.Millisecond))
	u := one.Register(t)
	k := newKey(t, one, u.Token, nil)
	settle := func(key string) { // everything applied, and the key cached on replica two
		require.NoError(t, two.Bus.Sync(context.Background()))
		require.Equal(t, http.StatusOK, generate(two, key).Status)
		require.Equal(t, http.StatusOK, generate(two, key).Status)
	}
	settle(k.Key)
	r := one.Do(apptest.Request{Method: "POST", Path: fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID), Token: u.Token, SkipSync: true})
	require.Equal(t, http.StatusOK, r.Status)
	var rotated keyView
	r.Decode(t, &rotated)
	assert.Equal(t, http.StatusUnauthorized, generate(two, k.Key).Status, "the rotated-out key is refused by the other replica")
	settle(rotated.Key)
	r = one.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/ai-keys/%d", k.ID), Token: u.Token, SkipSync: true})
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, http.StatusUnauthorized, generate(two, rotated.Key).Status, "refused by the other replica on the next request")
}

func TestPerKeyRateLimitAndQuota(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, map[string]any{"RateLimit:AiGenerate": "2-M", "AiKeys:MaxPerUser": 2})
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	other := newKey(t, a, u.Token, nil)
	assert.Equal(t, http.StatusOK, generate(a, k.Key).Status)
	assert.Equal(t, http.StatusOK, generate(a, k.Key).Status)
	r := generate(a, k.Key)
	assert.Equal(t, http.StatusTooManyRequests, r.Status)
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	assert.Contains(t, r.Env.Message, "retry in "+r.Header.Get("Retry-After")+" s", "the header and the message agree")
	// The pass-through refuses the spent key alike, its Retry-After rounded as the message says.
	res, body := chatRaw(t, a, k.Key, map[string]any{"model": "m", "messages": []map[string]string{{"role": "user", "content": "hi"}}})
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode, body)
	assert.Contains(t, body, "retry in "+res.Header.Get("Retry-After")+" s", "the header and the message agree")
	assert.Equal(t, http.StatusOK, generate(a, other.Key).Status, "the limit is per key")
	assert.Equal(t, http.StatusConflict, a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "third"}).Status)
}

func TestUpstreamFailuresAre502(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	up.Set(func(b *aikeystest.Behaviour) { b.Fail = 500 })
	r := generate(a, k.Key)
	assert.Equal(t, http.StatusBadGateway, r.Status)
	assert.NotContains(t, string(r.Raw), upstreamKey)

	up.Set(func(b *aikeystest.Behaviour) { b.Fail, b.Delay = 0, 2500*time.Millisecond })
	assert.Equal(t, http.StatusBadGateway, generate(a, k.Key).Status, "a timeout is a 502")
	up.Set(func(b *aikeystest.Behaviour) { b.Delay = 0 })

	res := chat(t, a, "Authorization", "Bearer "+k.Key, false)
	assert.Equal(t, http.StatusOK, res.StatusCode)
	res.Body.Close()
	up.Set(func(b *aikeystest.Behaviour) { b.Fail = 503 })
	res = chat(t, a, "X-API-Key", k.Key, false)
	assert.Equal(t, http.StatusBadGateway, res.StatusCode)
	var oe struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&oe))
	res.Body.Close()
	assert.Equal(t, "upstream_error", oe.Error.Code, "OpenAI's error format")
}

// TestPassthroughRelaysTheUpstreamsAnswers: what an OpenAI SDK sees when the upstream refuses,
// stalls or answers too much, streamed or not.
func TestPassthroughRelaysTheUpstreamsAnswers(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	set := func(fail int, huge bool, delay time.Duration) {
		up.Set(func(b *aikeystest.Behaviour) { b.Fail, b.Huge, b.Delay = fail, huge, delay })
	}
	type openAIErr struct {
		Error struct{ Message, Type, Code string } `json:"error"`
	}
	read := func(res *http.Response) (openAIErr, string) {
		defer res.Body.Close()
		raw, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		var oe openAIErr
		_ = json.Unmarshal(raw, &oe)
		return oe, string(raw)
	}
	badGateway := func(stream bool, code, why string) {
		t.Helper()
		res := chat(t, a, "X-API-Key", k.Key, stream)
		oe, raw := read(res)
		assert.Equal(t, http.StatusBadGateway, res.StatusCode, why)
		assert.Equal(t, code, oe.Error.Code, why)
		assert.NotContains(t, raw, upstreamKey, why)
	}
	for _, stream := range []bool{false, true} {
		name := fmt.Sprintf("stream=%v", stream)
		set(http.StatusBadRequest, false, 0)
		res := chat(t, a, "X-API-Key", k.Key, stream)
		oe, _ := read(res)
		assert.Equal(t, http.StatusBadRequest, res.StatusCode, "%s: the upstream's own 4xx goes through", name)
		assert.Equal(t, "application/json", res.Header.Get("Content-Type"), name)
		assert.Equal(t, "upstream exploded", oe.Error.Message, name)

		set(http.StatusTooManyRequests, false, 0)
		res = chat(t, a, "X-API-Key", k.Key, stream)
		_, _ = read(res)
		assert.Equal(t, http.StatusTooManyRequests, res.StatusCode, name)
		assert.Equal(t, "7", res.Header.Get("Retry-After"), "%s: the SDK's retry waits as the upstream asked", name)

		// A 401 or 403 refuses the gateway's credentials, not the client's: a 502 that never quotes them.
		for _, refused := range []int{http.StatusUnauthorized, http.StatusForbidden} {
			set(refused, false, 0)
			badGateway(stream, "upstream_error", fmt.Sprintf("%s, upstream %d", name, refused))
		}
	}

	set(0, false, 2500*time.Millisecond) // Ai:TimeoutSeconds is 2
	badGateway(false, "upstream_unavailable", "a timeout is a 502")

	set(0, true, 0)
	badGateway(false, "upstream_too_large", "an answer over 16 MiB is not read into memory")
	r := generate(a, k.Key)
	assert.Equal(t, http.StatusBadGateway, r.Status)
	assert.Contains(t, string(r.Raw), "too large")
	set(http.StatusBadRequest, true, 0) // a refused stream's error body is read whole: bounded too
	badGateway(true, "upstream_too_large", "a refused stream's error over 16 MiB is not relayed cut short")

	set(0, false, 0)
	res := chat(t, a, "X-API-Key", k.Key, false)
	_, _ = read(res)
	assert.Equal(t, http.StatusOK, res.StatusCode, "healthy again")
}

func chat(t *testing.T, a *apptest.App, header, value string, stream bool) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "fake-model", "stream": stream, "messages": []map[string]string{{"role": "user", "content": "hi"}}})
	req, err := http.NewRequest("POST", a.URL+"/api/ai/v1/chat/completions", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(header, value)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	return res
}

func TestPassthroughAuthAndFormat(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	res := chat(t, a, "Authorization", "Bearer "+k.Key, false)
	require.Equal(t, http.StatusOK, res.StatusCode)
	var cr struct {
		Object  string
		Choices []struct{ Message struct{ Content string } }
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&cr))
	res.Body.Close()
	assert.Equal(t, "chat.completion", cr.Object, "OpenAI's own format, not the envelope")
	assert.Equal(t, "Hello there", cr.Choices[0].Message.Content)

	for name, hv := range map[string][2]string{
		"jwt as bearer": {"Authorization", "Bearer " + u.Token},
		"no key":        {"X-Nothing", "x"},
		"unknown key":   {"X-API-Key", "sk-prov-nope"},
	} {
		res := chat(t, a, hv[0], hv[1], false)
		assert.Equal(t, http.StatusUnauthorized, res.StatusCode, name)
		res.Body.Close()
	}
}

// TestStreamingIsRelayedIncrementally: the first chunk reaches the client while the upstream is
// still holding the rest; the final usage chunk is metered.
func TestStreamingIsRelayedIncrementally(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	release := make(chan struct{})
	up.Set(func(b *aikeystest.Behaviour) { b.Release, b.Finished = release, make(chan struct{}) })

	res := chat(t, a, "X-API-Key", k.Key, true)
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Contains(t, res.Header.Get("Content-Type"), "text/event-stream")
	rd := bufio.NewReader(res.Body)
	first, err := rd.ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, first, `"Hel"`, "the first chunk arrives before the upstream finished")
	bodies := up.Bodies()
	assert.Equal(t, true, bodies[len(bodies)-1]["stream_options"].(map[string]any)["include_usage"], "usage is asked for")
	close(release)
	rest, err := io.ReadAll(rd)
	require.NoError(t, err)
	res.Body.Close()
	assert.Contains(t, string(rest), `"lo"`)
	assert.Contains(t, string(rest), "[DONE]")

	require.Eventually(t, func() bool {
		var ks []keyView
		a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
		return len(ks) == 1 && ks[0].Usage.PromptTokens == 7 && ks[0].Usage.CompletionTokens == 2
	}, 5*time.Second, 100*time.Millisecond, "the usage chunk is metered")
}

func TestDisconnectMidStreamIsStillCharged(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	release, finished := make(chan struct{}), make(chan struct{})
	up.Set(func(b *aikeystest.Behaviour) { b.Release, b.Finished = release, finished })
	res := chat(t, a, "X-API-Key", k.Key, true)
	rd := bufio.NewReader(res.Body)
	_, err := rd.ReadString('\n')
	require.NoError(t, err)
	res.Body.Close() // the client goes away mid-stream
	close(release)
	select {
	case <-finished:
	case <-time.After(5 * time.Second):
	}
	require.Eventually(t, func() bool {
		var ks []keyView
		a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
		return len(ks) == 1 && ks[0].Usage.Requests == 1 && ks[0].Usage.CompletionTokens >= 1
	}, 5*time.Second, 100*time.Millisecond, "what was generated is charged")
}

func TestDeletedUsersKeysAreRefusedOnEveryReplica(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	kv := map[string]any{"Ai:BaseUrl": up.URL, "Ai:ApiKey": upstreamKey, "Redis:KeyPrefix": "del" + testutil.RandomSuffix()}
	one := apptest.Start(t, apptest.With(kv))
	two := apptest.Start(t, apptest.With(kv), apptest.WithFeedLag(150*time.Millisecond))
	u := one.Register(t)
	k := newKey(t, one, u.Token, nil)
	admin := one.AdminToken(t)
	require.NoError(t, two.Bus.Sync(context.Background()))
	require.Equal(t, http.StatusOK, generate(two, k.Key).Status) // cached on replica two
	r := one.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin, SkipSync: true})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, http.StatusUnauthorized, generate(two, k.Key).Status)
	assert.Equal(t, http.StatusUnauthorized, generate(one, k.Key).Status)

	// The revoke is audited as the owner's own would be, by the admin who deleted the user.
	var revoked []string
	require.NoError(t, one.DB.NewSelect().Table("audit_events").Column("target_id").Where("action = 'aikey.revoked'").
		Where("user_id = ?", u.ID).Where("actor_user_id = (SELECT id FROM users WHERE email = ? AND deleted_at IS NULL)", apptest.AdminEmail).
		Where("details->>'reason' = 'user.deleted'").Scan(context.Background(), &revoked))
	assert.Equal(t, []string{fmt.Sprint(k.ID)}, revoked)
}
