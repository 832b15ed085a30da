package aikeys_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys"
)

// TestEndedKeysLeaveTheListAfterThirtyDays: a user who makes and revokes keys saw every key ever
// made in GET /api/me/ai-keys (a probe's 40 create-and-revoke rounds left 44 entries). A key
// revoked or expired within 30 days is still listed with its usage; one that ended longer ago is
// not; live keys always are.
func TestEndedKeysLeaveTheListAfterThirtyDays(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, map[string]any{"AiKeys:MaxPerUser": 10})
	u := a.Register(t)
	live := newKey(t, a, u.Token, map[string]any{"name": "live"})
	recent := newKey(t, a, u.Token, map[string]any{"name": "revoked lately"})
	old := newKey(t, a, u.Token, map[string]any{"name": "revoked long ago"})
	expiredOld := newKey(t, a, u.Token, map[string]any{"name": "expired long ago"})
	expiredRecent := newKey(t, a, u.Token, map[string]any{"name": "expired lately"})
	for _, k := range []keyView{recent, old} {
		r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/ai-keys/%d", k.ID), Token: u.Token})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	}
	_, err := a.DB.Exec("UPDATE ai_keys SET revoked_at = now() - interval '31 days' WHERE id = ?", old.ID)
	require.NoError(t, err)
	_, err = a.DB.Exec("UPDATE ai_keys SET created_at = now() - interval '60 days', expires_at = now() - interval '31 days' WHERE id = ?", expiredOld.ID)
	require.NoError(t, err)
	_, err = a.DB.Exec("UPDATE ai_keys SET expires_at = now() - interval '29 days' WHERE id = ?", expiredRecent.ID)
	require.NoError(t, err)

	var ks []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
	var names []string
	for _, k := range ks {
		names = append(names, k.Name)
	}
	assert.Equal(t, []string{"live", "revoked lately", "expired lately"}, names)
	assert.Equal(t, live.ID, ks[0].ID)
}

// TestEndedKeysListedAreBounded: creating and revoking keys in a loop grew GET /api/me/ai-keys
// without bound within the 30 days (a probe's 200,000 revoked keys made a 45 MB answer taking 9 s
// and 110 MB of the server's memory). The list shows the live keys and the latest
// aikeys.MaxEndedKeysListed that ended.
func TestEndedKeysListedAreBounded(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	live := newKey(t, a, u.Token, map[string]any{"name": "live"})
	n := aikeys.MaxEndedKeysListed + 5
	_, err := a.DB.Exec(`INSERT INTO ai_keys (user_id, name, prefix, key_hash, status, revoked_at)
		SELECT ?, 'revoked ' || g, 'sk-prov-xxxx', sha256(('ended ' || ? || ' ' || g)::bytea), 'Revoked', now() - g * interval '1 minute'
		FROM generate_series(1, ?) g`, u.ID, u.ID, n)
	require.NoError(t, err)
	expired := newKey(t, a, u.Token, map[string]any{"name": "expired just now"})
	_, err = a.DB.Exec("UPDATE ai_keys SET expires_at = now() WHERE id = ?", expired.ID)
	require.NoError(t, err)

	r := a.Get("/api/me/ai-keys", u.Token)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var ks []struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	r.Decode(t, &ks)
	require.Len(t, ks, 1+aikeys.MaxEndedKeysListed)
	assert.Equal(t, live.ID, ks[0].ID, "live keys are always listed, by id")
	names := map[string]bool{}
	for i, k := range ks {
		names[k.Name] = true
		if i > 0 {
			assert.Less(t, ks[i-1].ID, k.ID, "by id")
		}
	}
	assert.True(t, names["expired just now"], "the latest ended")
	assert.True(t, names["revoked 1"])
	assert.True(t, names[fmt.Sprintf("revoked %d", aikeys.MaxEndedKeysListed-1)])
	assert.False(t, names[fmt.Sprintf("revoked %d", aikeys.MaxEndedKeysListed)], "the earliest ended are left out")
}
