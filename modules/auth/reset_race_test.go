package auth_test

import (
	"context"
	"crypto/sha256"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/secrets"
)

// Two reset links of one account used at the same moment (two mails asked for, opened in two
// tabs; or the owner and whoever else asked for one): one sets the password, the other is the 400
// of a spent link (never a 503 from a deadlock); both links end spent.
func TestTwoResetLinksUsedAtOnceAnswer200And400(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	ctx := context.Background()
	link := func() string {
		tok := secrets.RandomToken(32)
		sum := sha256.Sum256([]byte(tok))
		_, err := a.DB.ExecContext(ctx, "INSERT INTO password_reset_tokens (user_id, token_hash, email, expires_at) VALUES (?, ?, ?, ?)",
			u.ID, sum[:], u.Email, time.Now().Add(time.Hour))
		require.NoError(t, err)
		return tok
	}
	links := []string{link(), link()}

	// Both resets are parked behind a transaction holding the account's row (as an admin's
	// change of it would), so that they run at the same moment once it ends.
	hold, err := a.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer func() { _ = hold.Rollback() }()
	_, err = hold.ExecContext(ctx, "SELECT 1 FROM users WHERE id = ? FOR UPDATE", u.ID)
	require.NoError(t, err)

	type answer struct {
		password string
		r        *apptest.Resp
	}
	answers := make(chan answer, len(links))
	for i, tok := range links {
		password := []string{"first-new-passphrase-41", "second-new-passphrase-42"}[i]
		go func() {
			answers <- answer{password, a.Post("/api/auth/reset-password", "", map[string]any{"token": tok, "newPassword": password})}
		}()
	}
	a.AwaitLockWaits(t, len(links), "FOR UPDATE", func() string {
		if len(answers) > 0 {
			return "a reset answered while the account's row was held"
		}
		return ""
	})
	require.NoError(t, hold.Rollback())

	var won string
	statuses := map[int]int{}
	for range links {
		got := <-answers
		statuses[got.r.Status]++
		switch got.r.Status {
		case http.StatusOK:
			won = got.password
		case http.StatusBadRequest:
			assert.Equal(t, []string{"token"}, got.r.Fields(), string(got.r.Raw))
		default:
			t.Errorf("reset answered %d: %s", got.r.Status, got.r.Raw)
		}
	}
	assert.Equal(t, map[int]int{http.StatusOK: 1, http.StatusBadRequest: 1}, statuses)
	require.NotEmpty(t, won)
	assert.Equal(t, http.StatusOK, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": won}).Status,
		"the reset that answered 200 set the password")
	var unspent int
	require.NoError(t, a.DB.QueryRowContext(ctx, "SELECT count(*) FROM password_reset_tokens WHERE user_id = ? AND used_at IS NULL", u.ID).Scan(&unspent))
	assert.Zero(t, unspent, "both links are spent")
	var resets int
	require.NoError(t, a.DB.QueryRowContext(ctx, "SELECT count(*) FROM audit_events WHERE action = 'user.password.reset' AND user_id = ?", u.ID).Scan(&resets))
	assert.Equal(t, 1, resets)
}
