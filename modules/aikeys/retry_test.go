package aikeys_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys/aikeystest"
)

// chatRaw posts body to the pass-through with key and answers the status and the whole body.
func chatRaw(t *testing.T, a *apptest.App, key string, body any) (*http.Response, string) {
	t.Helper()
	raw, ok := body.([]byte)
	if !ok {
		raw, _ = json.Marshal(body)
	}
	req, err := http.NewRequest("POST", a.URL+"/api/ai/v1/chat/completions", bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, string(out)
}

type openAIError struct {
	Error struct {
		Message, Type, Code string
		Param               *string
	} `json:"error"`
}

func streamBody(extra map[string]any) map[string]any {
	b := map[string]any{"model": "fake-model", "stream": true, "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

// TestIdleConnectionsClosedByTheUpstream: uvicorn and Node close idle keep-alive connections after
// 5 s; this upstream after 200 ms. A call after an idle gap longer than that still succeeds, on
// every route and streamed or not (the old client kept connections 90 s and never retried a POST).
func TestIdleConnectionsClosedByTheUpstream(t *testing.T) {
	t.Parallel()
	up := newUpstream(t, func(s *http.Server) { s.IdleTimeout = 200 * time.Millisecond })
	a := apptest.Start(t, apptest.With(map[string]any{"Ai:BaseUrl": up.URL, "Ai:ApiKey": upstreamKey, "Ai:DefaultModel": "fake-model", "Ai:TimeoutSeconds": 2}))
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	for i := 0; i < 3; i++ {
		r := generate(a, k.Key)
		require.Equal(t, http.StatusOK, r.Status, "generate after an idle gap (%d): %s", i, r.Raw)
		res, body := chatRaw(t, a, k.Key, map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}})
		require.Equal(t, http.StatusOK, res.StatusCode, "pass-through after an idle gap (%d): %s", i, body)
		res, body = chatRaw(t, a, k.Key, streamBody(nil))
		require.Equal(t, http.StatusOK, res.StatusCode, "stream after an idle gap (%d): %s", i, body)
		assert.Contains(t, body, "[DONE]")
		time.Sleep(400 * time.Millisecond)
	}
}

// TestRequestMeetingAClosingConnectionIsSentAgain: the upstream closes a reused connection as the
// request arrives (the race an idle timeout leaves); the request is sent again, once, on a fresh
// connection. A request failing on a fresh connection is not sent twice.
func TestRequestMeetingAClosingConnectionIsSentAgain(t *testing.T) {
	t.Parallel()
	a, up := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	up.Set(func(b *aikeystest.Behaviour) { b.DropReused = true })
	for i := 0; i < 3; i++ {
		r := generate(a, k.Key)
		require.Equal(t, http.StatusOK, r.Status, "generate %d: %s", i, r.Raw)
		res, body := chatRaw(t, a, k.Key, map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}})
		require.Equal(t, http.StatusOK, res.StatusCode, "pass-through %d: %s", i, body)
		res, body = chatRaw(t, a, k.Key, streamBody(nil))
		require.Equal(t, http.StatusOK, res.StatusCode, "stream %d: %s", i, body)
		assert.Contains(t, body, "[DONE]")
	}

	up.Set(func(b *aikeystest.Behaviour) { b.DropReused, b.DropAll = false, true })
	time.Sleep(4500 * time.Millisecond) // the pools' idle connections are dropped (4 s)
	before := upstreamCalls(up)
	assert.Equal(t, http.StatusBadGateway, generate(a, k.Key).Status)
	res, _ := chatRaw(t, a, k.Key, streamBody(nil))
	assert.Equal(t, http.StatusBadGateway, res.StatusCode)
	assert.Equal(t, before+2, upstreamCalls(up), "a request refused on a fresh connection is not sent again")
}

// upstreamCalls counts every request the fake received, dropped ones included.
func upstreamCalls(up *aikeystest.Upstream) int {
	return up.Served() + up.Dropped()
}
