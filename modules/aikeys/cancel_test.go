package aikeys_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys"
	"provisioner/modules/aikeys/aikeystest"
)

// TestStalledStreamIsCancelledWhenTheClientLeaves: a client that gave up on a stream the upstream
// stalls left the upstream request open until Ai:TimeoutSeconds (nothing is written, so nothing
// noticed), the upstream generating for nobody. The gateway sends an SSE comment while the
// upstream is silent; when it cannot, it cancels the upstream request at once. The client is
// charged what the upstream generated before that.
func TestStalledStreamIsCancelledWhenTheClientLeaves(t *testing.T) {
	t.Cleanup(aikeys.SetStreamKeepAlive(200 * time.Millisecond))
	a, up := setup(t, map[string]any{"Ai:TimeoutSeconds": 60})
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	finished := make(chan struct{})
	up.Set(func(b *aikeystest.Behaviour) { b.Release, b.Finished = make(chan struct{}), finished }) // the first chunk, then nothing

	res := chat(t, a, "X-API-Key", k.Key, true)
	require.Equal(t, http.StatusOK, res.StatusCode)
	rd := bufio.NewReader(res.Body)
	first, err := rd.ReadString('\n')
	require.NoError(t, err)
	assert.Contains(t, first, `"Hel"`)
	_, _ = rd.ReadString('\n') // the blank line ending the event
	// While the upstream is silent the client sees comments, which SSE clients ignore.
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, ": keep-alive\n", line)
	start := time.Now()
	res.Body.Close() // the client gives up
	select {
	case <-finished:
		assert.Less(t, time.Since(start), 3*time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request is still open 5 s after the client left (Ai:TimeoutSeconds is 60)")
	}
	require.Eventually(t, func() bool {
		var ks []keyView
		a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
		return len(ks) == 1 && ks[0].Usage.Requests == 1 && ks[0].Usage.CompletionTokens == 1
	}, 5*time.Second, 100*time.Millisecond, "charged what was generated before the cancel: one delta")
}

// TestHangingUpstreamIsCancelledWhenTheStreamClientLeaves: a stream request the upstream does not
// answer at all (no headers yet, so nothing is written to the client) stayed open upstream until
// Ai:TimeoutSeconds after the client gave up. The gateway watches the client's connection while it
// waits and cancels the upstream request once the client is gone.
func TestHangingUpstreamIsCancelledWhenTheStreamClientLeaves(t *testing.T) {
	t.Parallel()
	a, up := setup(t, map[string]any{"Ai:TimeoutSeconds": 60})
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	body, _ := json.Marshal(streamBody(nil))
	clientLeavesHangingUpstream(t, a, up, k.Key, "/api/ai/v1/chat/completions", string(body))
	time.Sleep(1500 * time.Millisecond) // a flush
	var ks []keyView
	a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
	assert.EqualValues(t, 0, ks[0].Usage.Requests, "nothing generated, nothing charged")
}

// TestHangingUpstreamIsCancelledWhenAPlainClientLeaves: a non-streamed call (/api/ai/generate, or
// the pass-through without `stream`) whose client gave up kept the upstream request open until
// Ai:TimeoutSeconds: the pooled client could not stop a call in flight, so the upstream generated
// for nobody. The gateway now watches the client while it waits and, once it is gone, closes the
// connection the call is on. Nothing was read, so nothing is charged, and the next call is served.
func TestHangingUpstreamIsCancelledWhenAPlainClientLeaves(t *testing.T) {
	t.Parallel()
	a, up := setup(t, map[string]any{"Ai:TimeoutSeconds": 60})
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	for _, route := range []struct{ name, path string }{
		{"generate", "/api/ai/generate"}, {"pass-through", "/api/ai/v1/chat/completions"},
	} {
		t.Run(route.name, func(t *testing.T) {
			body := `{"prompt":"hi"}`
			if route.name == "pass-through" {
				body = `{"model":"fake-model","messages":[{"role":"user","content":"hi"}]}`
			}
			clientLeavesHangingUpstream(t, a, up, k.Key, route.path, body)
			// The abandoned connection is not handed to the next call: it is answered.
			r := generate(a, k.Key)
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		})
	}
	time.Sleep(1500 * time.Millisecond) // a flush
	var ks []keyView
	a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
	assert.EqualValues(t, 2, ks[0].Usage.Requests, "the two abandoned calls are not charged, the two answered ones are")
}

// clientLeavesHangingUpstream makes the upstream answer nothing, sends body to path with a client
// that gives up after 1 s (curl -m 1), and asserts the upstream request ends within 4 s of that,
// far sooner than Ai:TimeoutSeconds (60 in these tests). The upstream answers again afterwards.
func clientLeavesHangingUpstream(t *testing.T, a *apptest.App, up *aikeystest.Upstream, key, path, body string) {
	t.Helper()
	finished := make(chan struct{})
	up.Set(func(b *aikeystest.Behaviour) { b.Hang, b.Finished = true, finished })
	defer func() {
		up.Set(func(b *aikeystest.Behaviour) { b.Hang = false })
	}()
	req, err := http.NewRequest("POST", a.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	start := time.Now()
	_, err = (&http.Client{Timeout: time.Second}).Do(req)
	require.Error(t, err, "the client gives up")
	select {
	case <-finished:
		assert.Less(t, time.Since(start), 4*time.Second)
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream request is still open 5 s after the client left (Ai:TimeoutSeconds is 60)")
	}
}
