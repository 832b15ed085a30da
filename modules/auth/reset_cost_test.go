package auth_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/platform/secrets"
)

// A reset with a token that resets nothing (unknown, expired, spent, or mailed to an address the
// account no longer has) is refused before the new password is hashed, so it takes no argon2id
// hash from the slots login waits for.
func TestResetWithADeadTokenCostsNoHash(t *testing.T) {
	var hasher *secrets.Hasher
	a := apptest.Start(t, apptest.WithFx(fx.Populate(&hasher)))
	u := a.Register(t)
	token := func(expires time.Duration, email string) string {
		tok := secrets.RandomToken(32)
		sum := sha256.Sum256([]byte(tok))
		_, err := a.DB.ExecContext(context.Background(), "INSERT INTO password_reset_tokens (user_id, token_hash, email, expires_at) VALUES (?, ?, ?, ?)",
			u.ID, sum[:], email, time.Now().Add(expires))
		require.NoError(t, err)
		return tok
	}
	reset := func(tok, password string) *apptest.Resp {
		return a.Post("/api/auth/reset-password", "", map[string]any{"token": tok, "newPassword": password})
	}
	live := token(time.Hour, u.Email)
	before := hasher.Taken()
	r := reset(live, "a-brand-new-passphrase-77")
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	require.Equal(t, before+1, hasher.Taken(), "a good token costs one hash")

	for name, tok := range map[string]string{
		"unknown":        "not-a-token-" + secrets.RandomToken(8),
		"spent":          live,
		"expired":        token(-time.Minute, u.Email),
		"another e-mail": token(time.Hour, "someone-else-"+u.Email),
	} {
		before := hasher.Taken()
		r := reset(tok, "yet-another-passphrase-8")
		assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", name, r.Raw)
		assert.Contains(t, string(r.Raw), "is invalid, expired or already used", name)
		assert.Equal(t, before, hasher.Taken(), "%s: no hash computed", name)
	}
	assert.Equal(t, http.StatusOK, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": "a-brand-new-passphrase-77"}).Status,
		"no refused reset changed the password")
}
