package auth_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// TestStoredDisplayNameEmailsBecomeBare: before platform/emailaddr an email was stored as typed
// ("bob <bob@…>", "bob@… (work)"); login and forgot-password now take only a bare address, so
// such an account could no longer sign in. Migration 20261123231500 rewrites it to the bare
// address, unless another live account has that address: that row stays as it was, reported.
func TestStoredDisplayNameEmailsBecomeBare(t *testing.T) {
	url, drop, err := testutil.CreateDatabase("auth_bare_emails")
	require.NoError(t, err)
	t.Cleanup(drop)
	cfg := apptest.With(map[string]any{"ConnectionStrings:Control": url, "RateLimit:Login": "1000-M", "RateLimit:LoginPerIp": "1000-M", "RateLimit:Register": "1000-M"})
	before := apptest.Start(t, cfg)
	bob, carol, ada, eve, odd := before.Register(t), before.Register(t), before.Register(t), before.Register(t), before.Register(t)
	// What an earlier release stored (trimmed, lower-cased, as typed), written directly.
	stored := map[int64]string{
		bob.ID:   "bob <" + bob.Email + ">",
		carol.ID: carol.Email + " (work)",
		eve.ID:   `"eve" <` + ada.Email + ">", // ada's address: a second account around it
		odd.ID:   `"odd one"@example.test`,    // no bare address in it
	}
	ctx := context.Background()
	for id, email := range stored {
		_, err := before.DB.ExecContext(ctx, "UPDATE users SET email = ? WHERE id = ?", email, id)
		require.NoError(t, err)
	}
	_, err = before.DB.ExecContext(ctx, `INSERT INTO user_identities (user_id, provider, provider_user_id, email, email_verified)
		VALUES (?, 'github', ?, ?, true)`, bob.ID, "gh-"+testutil.RandomSuffix(), "bob <"+bob.Email+">")
	require.NoError(t, err)
	// The database as it was before the migration: it is pending again.
	_, err = before.DB.ExecContext(ctx, "DELETE FROM bun_migrations WHERE name = '20261123231500'")
	require.NoError(t, err)
	login := func(a *apptest.App, u apptest.User) *apptest.Resp {
		return a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password})
	}
	require.Equal(t, http.StatusUnauthorized, login(before, bob).Status, "bob cannot sign in before the migration")

	after := apptest.Start(t, cfg) // applies pending migrations
	for _, u := range []apptest.User{bob, carol, ada} {
		r := login(after, u)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", u.Email, r.Raw)
		var got struct {
			UserID int64 `json:"userId"`
		}
		r.Decode(t, &got)
		assert.Equal(t, u.ID, got.UserID, u.Email)
	}
	email := func(query string, id int64) string {
		var e string
		require.NoError(t, after.DB.QueryRowContext(ctx, query, id).Scan(&e))
		return e
	}
	const ofUser, ofIdentity = "SELECT email FROM users WHERE id = ?", "SELECT email FROM user_identities WHERE user_id = ?"
	assert.Equal(t, bob.Email, email(ofUser, bob.ID))
	assert.Equal(t, carol.Email, email(ofUser, carol.ID))
	assert.Equal(t, stored[eve.ID], email(ofUser, eve.ID), "a collision is left untouched")
	assert.Equal(t, stored[odd.ID], email(ofUser, odd.ID), "so is what holds no bare address")
	assert.Equal(t, bob.Email, email(ofIdentity, bob.ID), "identities too")

	// Nothing typed is lost: the audit log has each change and each row left alone.
	var from string
	var conflict int64
	require.NoError(t, after.DB.QueryRowContext(ctx, `SELECT details->>'from' FROM audit_events
		WHERE action = 'user.email_normalized' AND user_id = ?`, bob.ID).Scan(&from))
	assert.Equal(t, stored[bob.ID], from)
	require.NoError(t, after.DB.QueryRowContext(ctx, `SELECT (details->>'conflictsWith')::bigint FROM audit_events
		WHERE action = 'user.email_not_normalized' AND user_id = ?`, eve.ID).Scan(&conflict))
	assert.Equal(t, ada.ID, conflict)
}
