package aikeys_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// TestEveryRotatedOutTextKeepsItsGrace: rotating A→B with a grace period, then B→C with one, cut A
// off at once (a key had room for one previous text) although A was promised its grace period.
// Every rotated-out text now works until its own grace ends: a rotation without grace ends only
// the text it rotates out; at most 10 texts are in their grace period at once (409 past it);
// expiresAt and revocation end them all.
func TestEveryRotatedOutTextKeepsItsGrace(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, map[string]any{"RateLimit:AiGenerate": "100000-M"})
	u := a.Register(t)
	k := newKey(t, a, u.Token, nil)
	rotate := func(id int64, grace int) *apptest.Resp {
		return a.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", id), u.Token, map[string]any{"gracePeriodSeconds": grace})
	}
	text := func(r *apptest.Resp) string {
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		var v keyView
		r.Decode(t, &v)
		return v.Key
	}
	works := func(msg string, keys ...string) {
		t.Helper()
		for i, key := range keys {
			assert.Equal(t, http.StatusOK, generate(a, key).Status, "%s (text %d)", msg, i)
		}
	}
	refused := func(msg string, keys ...string) {
		t.Helper()
		for i, key := range keys {
			assert.Equal(t, http.StatusUnauthorized, generate(a, key).Status, "%s (text %d)", msg, i)
		}
	}

	A := k.Key
	works("cached before the rotations", A)
	B := text(rotate(k.ID, 600))
	C := text(rotate(k.ID, 600))
	works("A and B are in their grace periods, C is current", A, B, C)

	D := text(rotate(k.ID, 0))
	refused("a rotation without grace ends the text it rotates out", C)
	works("and leaves the earlier grace periods alone", A, B, D)

	graced := []string{A, B}
	current := D
	for len(graced) < 10 {
		graced = append(graced, current)
		current = text(rotate(k.ID, 600))
	}
	r := rotate(k.ID, 600)
	require.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	assert.Contains(t, r.Env.Message, "At most 10 rotated-out texts")
	works("a refused rotation changes nothing", append(graced, current)...)
	E := text(rotate(k.ID, 0))
	refused("a rotation without grace is still allowed", current)
	works("", append(graced, E)...)

	// expiresAt ends the grace periods with the key (set in the database: its change is on the feed).
	e := newKey(t, a, u.Token, map[string]any{"name": "expiring"})
	eOld := e.Key
	works("", eOld)
	eNew := text(rotate(e.ID, 600))
	works("", eOld, eNew)
	_, err := a.DB.Exec("UPDATE ai_keys SET expires_at = now() - interval '1 second' WHERE id = ?", e.ID)
	require.NoError(t, err)
	require.NoError(t, a.Bus.Sync(context.Background()))
	refused("an expired key's rotated-out texts are refused", eOld, eNew)

	// A change to a rotated-out text reaches the cached checks too, even one made by hand.
	_, err = a.DB.Exec("DELETE FROM ai_key_retired_hashes WHERE hash = sha256(convert_to(?, 'UTF8'))", A)
	require.NoError(t, err)
	require.NoError(t, a.Bus.Sync(context.Background()))
	refused("a grace period ended in the database", A)
	works("", B, E)

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/ai-keys/%d", k.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	refused("revocation ends every grace period", append(graced, E)...)
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM ai_key_retired_hashes WHERE key_id = ?", k.ID).Scan(&n))
	assert.Zero(t, n, "nothing of a revoked key is kept")
}

// TestGraceTextsAreRefusedOnTheOtherReplicaOnceRevoked: texts in their grace period, cached on a
// replica that applies the change feed late, are refused there on the next request once another
// replica answered the revocation (or the owner's deletion).
func TestGraceTextsAreRefusedOnTheOtherReplicaOnceRevoked(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	kv := map[string]any{"Ai:BaseUrl": up.URL, "Ai:ApiKey": upstreamKey, "Redis:KeyPrefix": "grace" + testutil.RandomSuffix()}
	one := apptest.Start(t, apptest.With(kv))
	two := apptest.Start(t, apptest.With(kv), apptest.WithFeedLag(150*time.Millisecond))
	admin := one.AdminToken(t)
	for _, how := range []string{"revoke", "delete user"} {
		u := one.Register(t)
		k := newKey(t, one, u.Token, nil)
		texts := []string{k.Key}
		for range 2 {
			r := one.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID), u.Token, map[string]any{"gracePeriodSeconds": 600})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			var v keyView
			r.Decode(t, &v)
			texts = append(texts, v.Key)
		}
		require.NoError(t, two.Bus.Sync(context.Background()))
		for _, key := range texts { // cached on replica two
			require.Equal(t, http.StatusOK, generate(two, key).Status)
			require.Equal(t, http.StatusOK, generate(two, key).Status)
		}
		req := apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/ai-keys/%d", k.ID), Token: u.Token, SkipSync: true}
		if how == "delete user" {
			req = apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin, SkipSync: true}
		}
		r := one.Do(req)
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		for i, key := range texts {
			assert.Equal(t, http.StatusUnauthorized, generate(two, key).Status, "%s: text %d refused by the other replica", how, i)
		}
	}
}
