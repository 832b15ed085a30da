package auth_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// Eve registers the owner's address (never proving the mailbox) and makes an AI key. The owner
// takes the account over by a reset through the mailed link: Eve's token dies with the stamp, and
// her AI key must die with it (it works without the account's tokens). The reset answers only once
// the key is refused everywhere, and the revocation is audited. A later reset of the now proven
// account is no takeover: the owner's own keys are left alone.
func TestTakeoverByResetRevokesTheSquattersAIKeys(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a := apptest.Start(t, apptest.With(map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port, "Frontend:BaseUrl": frontend}))
	eve := a.Register(t)
	key := func(token string) (int64, string) {
		r := a.Post("/api/me/ai-keys", token, map[string]any{"name": "eve's"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
		var k struct {
			ID  int64  `json:"id"`
			Key string `json:"key"`
		}
		r.Decode(t, &k)
		return k.ID, k.Key
	}
	accepted := func(k string) bool {
		r := a.Do(apptest.Request{Method: http.MethodPost, Path: "/api/ai/generate", Body: map[string]any{"prompt": "hi"},
			Header: map[string]string{"X-API-Key": k}, SkipSync: true})
		return r.Status != http.StatusUnauthorized
	}
	eveKeyID, eveKey := key(eve.Token)
	require.True(t, accepted(eveKey), "the key works before the reset")

	reset := func(password string) *apptest.Resp {
		before := smtp.CountTo(eve.Email)
		require.Equal(t, http.StatusOK, a.Post("/api/auth/forgot-password", "", map[string]any{"email": eve.Email}).Status)
		msgs := smtp.WaitForN(t, eve.Email, before+1, 10*time.Second)
		r := a.Post("/api/auth/reset-password", "", map[string]any{"token": resetTokenIn(t, msgs[len(msgs)-1]), "newPassword": password})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		return r
	}
	r := reset("the-mailbox-owners-passphrase-6")
	assert.Contains(t, r.Env.Message, "AI key", "the owner is told the keys were revoked")
	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", eve.Token).Status, "Eve's token is dead")
	assert.False(t, accepted(eveKey), "Eve's AI key is refused as soon as the reset is answered")
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM ai_keys WHERE id = ?", eveKeyID).Scan(&status))
	assert.Equal(t, "Revoked", status)

	var raw []byte
	require.NoError(t, a.DB.QueryRow(`SELECT details FROM audit_events WHERE action = 'user.password.reset' AND user_id = ?
		ORDER BY id DESC LIMIT 1`, eve.ID).Scan(&raw))
	var details struct {
		Takeover bool `json:"takeover"`
		Revoked  struct {
			AIKeys    []int64 `json:"aiKeys"`
			Databases []int64 `json:"databasePasswordsRotated"`
		} `json:"revoked"`
	}
	require.NoError(t, json.Unmarshal(raw, &details), string(raw))
	assert.True(t, details.Takeover, string(raw))
	assert.Equal(t, []int64{eveKeyID}, details.Revoked.AIKeys, string(raw))
	var liveDatabases int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM database_instances WHERE user_id = ? AND status <> 'Deleted'", eve.ID).Scan(&liveDatabases))
	assert.Len(t, details.Revoked.Databases, liveDatabases, "the databases whose passwords are rotated are named: %s", raw)
	var n int
	require.NoError(t, a.DB.QueryRow(`SELECT count(*) FROM audit_events WHERE action = 'aikey.revoked' AND target_id = ?`,
		fmt.Sprint(eveKeyID)).Scan(&n))
	assert.Equal(t, 1, n, "the key's own revocation is audited")

	// The owner signs in, makes a key, and resets again: the email was proven, nothing is taken over.
	login := a.Post("/api/auth/login", "", map[string]any{"email": eve.Email, "password": "the-mailbox-owners-passphrase-6"})
	require.Equal(t, http.StatusOK, login.Status, string(login.Raw))
	var owner authData
	login.Decode(t, &owner)
	_, ownerKey := key(owner.AccessToken)
	r = reset("the-owners-second-passphrase-7")
	assert.Equal(t, "Password changed; sign in with the new password", r.Env.Message)
	assert.True(t, accepted(ownerKey), "a reset of a proven account leaves its keys alone")
}
