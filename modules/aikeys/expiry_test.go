package aikeys_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// TestExpiredKeysAndBlankNames: an expired key is listed as Expired and does not count toward
// AiKeys:MaxPerUser; it cannot be rotated; a name of only spaces is refused.
func TestExpiredKeysAndBlankNames(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, map[string]any{"AiKeys:MaxPerUser": 2})
	u := a.Register(t)
	expiring := newKey(t, a, u.Token, map[string]any{"name": "short", "expiresAt": time.Now().Add(1200 * time.Millisecond).UTC().Format(time.RFC3339Nano)})
	newKey(t, a, u.Token, nil)
	assert.Equal(t, http.StatusConflict, a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "third"}).Status)
	time.Sleep(1300 * time.Millisecond)

	var ks []keyView
	a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
	require.Len(t, ks, 2)
	assert.Equal(t, "Expired", ks[0].Status)
	assert.Equal(t, "Active", ks[1].Status)
	newKey(t, a, u.Token, map[string]any{"name": "third"}) // the expired key no longer counts
	assert.Equal(t, http.StatusConflict, a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "fourth"}).Status)
	assert.Equal(t, http.StatusConflict, a.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", expiring.ID), u.Token, nil).Status)

	for _, name := range []string{"   ", "\t\n"} {
		r := a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": name})
		require.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", name, r.Raw)
		require.Len(t, r.Env.Errors, 1)
		assert.Equal(t, "name", r.Env.Errors[0].Field)
	}
	k := newKey(t, a, a.Register(t).Token, map[string]any{"name": "  padded  "})
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM ai_keys WHERE id = ? AND name = 'padded'", k.ID).Scan(&n))
	assert.Equal(t, 1, n, "names are stored trimmed")
}

// TestExpiresAtBeyondYear9999: a key's views write expiresAt in UTC with a four-digit year, so an
// expiresAt past 9999-12-31T23:59:59.999999Z (9999-12-31T23:59:59-01:00 is in year 10000 in UTC)
// is a 400 naming it, and nothing is stored; it was stored, the create answered 500, and so did
// every later list of its owner's keys. Migration 20261125120000 brings such a stored key back to
// the last instant a view can show.
func TestExpiresAtBeyondYear9999(t *testing.T) {
	t.Parallel()
	url, drop, err := testutil.CreateDatabase("aikeys_expiry_range")
	require.NoError(t, err)
	t.Cleanup(drop)
	cfg := apptest.With(map[string]any{"ConnectionStrings:Control": url, "Ai:BaseUrl": newUpstream(t).URL, "Ai:ApiKey": upstreamKey})
	a := apptest.Start(t, cfg)
	u := a.Register(t)
	for _, at := range []string{"9999-12-31T23:59:59-01:00", "9999-12-31T20:00:00-12:00"} {
		r := a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "far", "expiresAt": at})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", at, r.Raw)
		require.Len(t, r.Env.Errors, 1, at)
		assert.Equal(t, "expiresAt", r.Env.Errors[0].Field, at)
	}
	list := a.Get("/api/me/ai-keys", u.Token)
	require.Equal(t, http.StatusOK, list.Status, string(list.Raw))
	assert.Contains(t, string(list.Raw), `"data":[]`, "nothing stored")

	// The latest instant a view can show is fine (to the microsecond PostgreSQL keeps).
	last := newKey(t, a, u.Token, map[string]any{"name": "last", "expiresAt": "9999-12-31T23:59:59.9999999Z"})
	far := newKey(t, a, u.Token, map[string]any{"name": "far", "expiresAt": "9999-12-31T22:00:00Z"})
	list = a.Get("/api/me/ai-keys", u.Token)
	require.Equal(t, http.StatusOK, list.Status, string(list.Raw))
	assert.Contains(t, string(list.Raw), `"expiresAt":"9999-12-31T23:59:59.999999Z"`)
	assert.Equal(t, http.StatusOK, generate(a, last.Key).Status)

	// What the earlier code stored, written directly; the migration is pending again.
	ctx := context.Background()
	_, err = a.DB.ExecContext(ctx, "UPDATE ai_keys SET expires_at = '10000-01-01 00:59:59+00' WHERE id = ?", far.ID)
	require.NoError(t, err)
	require.Equal(t, http.StatusInternalServerError, a.Get("/api/me/ai-keys", u.Token).Status, "as it was")
	_, err = a.DB.ExecContext(ctx, "DELETE FROM bun_migrations WHERE name = '20261125120000'")
	require.NoError(t, err)
	after := apptest.Start(t, cfg) // applies pending migrations
	list = after.Get("/api/me/ai-keys", u.Token)
	require.Equal(t, http.StatusOK, list.Status, string(list.Raw))
	assert.Equal(t, 2, strings.Count(string(list.Raw), `"expiresAt":"9999-12-31T23:59:59.999999Z"`), string(list.Raw))
	assert.Equal(t, http.StatusOK, generate(after, far.Key).Status, "the key still works")
}
