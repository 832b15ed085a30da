package aikeys_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

type bucket struct {
	Start            time.Time `json:"start"`
	Requests         int64     `json:"requests"`
	PromptTokens     int64     `json:"promptTokens"`
	CompletionTokens int64     `json:"completionTokens"`
	Refused          int64     `json:"refused"`
}

// TestUsageOverTime: generations and refusals land in hourly buckets, read per key by its owner
// (by hour or day) and per user by admins; another user's key is a 404.
func TestUsageOverTime(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	require.Equal(t, http.StatusOK, generate(a, k.Key).Status)
	require.Equal(t, http.StatusOK, generate(a, k.Key).Status)
	r := a.Do(apptest.Request{Method: "POST", Path: "/api/ai/generate", Body: map[string]any{"prompt": "hi", "model": "not-allowed"},
		Header: map[string]string{"X-API-Key": k.Key}, SkipSync: true})
	require.Equal(t, http.StatusBadRequest, r.Status)

	read := func(path, token string) []bucket {
		t.Helper()
		r := a.Get(path, token)
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		var b []bucket
		r.Decode(t, &b)
		return b
	}
	path := fmt.Sprintf("/api/me/ai-keys/%d/usage", k.ID)
	var got []bucket
	require.Eventually(t, func() bool { // the meter writes about every second
		got = read(path, u.Token)
		return len(got) == 1 && got[0].Requests == 2 && got[0].Refused == 1
	}, 30*time.Second, 100*time.Millisecond, "%+v", got)
	hour := time.Now().UTC().Truncate(time.Hour)
	assert.Equal(t, bucket{Start: hour, Requests: 2, PromptTokens: 22, CompletionTokens: 4, Refused: 1}, got[0])

	day := read(path+"?granularity=day", u.Token)
	require.Len(t, day, 1)
	y, m, d := hour.Date()
	assert.Equal(t, time.Date(y, m, d, 0, 0, 0, 0, time.UTC), day[0].Start)
	assert.Empty(t, read(path+"?from="+hour.Add(-3*time.Hour).Format(time.RFC3339)+"&to="+hour.Format(time.RFC3339), u.Token))

	admin := a.AdminToken(t)
	all := read(fmt.Sprintf("/api/users/%d/ai-usage", u.ID), admin)
	require.Len(t, all, 1)
	assert.Equal(t, int64(2), all[0].Requests)
	assert.Equal(t, http.StatusForbidden, a.Get(fmt.Sprintf("/api/users/%d/ai-usage", u.ID), u.Token).Status)

	other := a.Register(t)
	assert.Equal(t, http.StatusNotFound, a.Get(path, other.Token).Status)
	r = a.Get(path+"?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", u.Token)
	assert.Equal(t, http.StatusBadRequest, r.Status)
}

// TestUsageIsFlushedOnCleanShutdown: what the last requests did is written when the service stops.
func TestUsageIsFlushedOnCleanShutdown(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	require.Equal(t, http.StatusOK, generate(a, k.Key).Status)
	a.Stop()
	after := apptest.Start(t) // the same control database
	var requests, prompt int64
	require.NoError(t, after.DB.QueryRow("SELECT requests, prompt_tokens FROM ai_key_usage_hourly WHERE key_id = ?", k.ID).Scan(&requests, &prompt))
	assert.Equal(t, int64(1), requests)
	assert.Equal(t, int64(11), prompt)
}
