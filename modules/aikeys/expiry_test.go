package aikeys_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExpiredKeysAndBlankNames: an expired key is listed as Expired and does not count toward
// AiKeys:MaxPerUser; it cannot be rotated; a name of only spaces is refused.
func TestExpiredKeysAndBlankNames(t *testing.T) {
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
