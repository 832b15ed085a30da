package auth_test

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

// One mailbox holds one account: "nü@…" typed precomposed (NFC) or with a combining diaeresis
// (NFD) is one address, as are "x@bücher.example" and its ASCII form "x@xn--bcher-kva.example":
// the second spelling is a 409, and login and forgot-password find the account whichever spelling
// is typed.
func TestOneMailboxHasOneSpelling(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Register": "1000-M", "RateLimit:Login": "1000-M", "RateLimit:LoginPerIp": "1000-M", "RateLimit:ForgotPassword": "1000-H", "RateLimit:ForgotPasswordPerIp": "1000-H"}))
	sfx := testutil.RandomSuffix()
	for _, tc := range []struct{ name, stored, other string }{
		{"NFC and NFD", "n\u00fc-" + sfx + "@probe.test", "nu\u0308-" + sfx + "@probe.test"},
		{"Unicode and ASCII domain", "x-" + sfx + "@b\u00fccher.example", "x-" + sfx + "@xn--bcher-kva.example"},
		{"ASCII and Unicode domain", "y-" + sfx + "@xn--bcher-kva.example", "y-" + sfx + "@B\u00dcCHER.example"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := a.Post("/api/auth/register", "", map[string]any{"fullName": "Nü", "email": tc.stored, "password": goodPassword})
			require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
			var d authData
			r.Decode(t, &d)
			r = a.Post("/api/auth/register", "", map[string]any{"fullName": "Nü again", "email": tc.other, "password": goodPassword})
			assert.Equal(t, http.StatusConflict, r.Status, "the same mailbox spelt otherwise: %s", r.Raw)

			r = a.Post("/api/auth/login", "", map[string]any{"email": tc.other, "password": goodPassword})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			var in authData
			r.Decode(t, &in)
			assert.Equal(t, d.UserID, in.UserID)

			require.Equal(t, http.StatusOK, a.Post("/api/auth/forgot-password", "", map[string]any{"email": tc.other}).Status)
			// The link is made in the background, after the answer.
			assert.Eventually(t, func() bool {
				var links int
				require.NoError(t, a.DB.QueryRowContext(context.Background(),
					"SELECT count(*) FROM password_reset_tokens WHERE user_id = ?", d.UserID).Scan(&links))
				return links == 1
			}, 5*time.Second, 20*time.Millisecond, "forgot-password found the account")
		})
	}
}

// TestStoredEmailsTakeTheOneSpelling: emails stored before emailaddr spelt each mailbox one way
// (NFD local parts, ASCII domains) are rewritten by migration 20261124010000 to the spelling login
// produces, unless another live account already has it: that row is left alone, reported.
func TestStoredEmailsTakeTheOneSpelling(t *testing.T) {
	url, drop, err := testutil.CreateDatabase("auth_email_forms")
	require.NoError(t, err)
	t.Cleanup(drop)
	cfg := apptest.With(map[string]any{"ConnectionStrings:Control": url, "RateLimit:Login": "1000-M", "RateLimit:LoginPerIp": "1000-M", "RateLimit:Register": "1000-M"})
	before := apptest.Start(t, cfg)
	nfd, ascii, owner, twin := before.Register(t), before.Register(t), before.Register(t), before.Register(t)
	sfx := testutil.RandomSuffix()
	stored := map[int64]string{
		nfd.ID:   "nu\u0308-" + sfx + "@probe.test",
		ascii.ID: "x-" + sfx + "@xn--bcher-kva.example",
		owner.ID: "o-" + sfx + "@b\u00fccher.example",
		twin.ID:  "o-" + sfx + "@xn--bcher-kva.example", // owner's mailbox, a second account around it
	}
	ctx := context.Background()
	for id, email := range stored {
		_, err := before.DB.ExecContext(ctx, "UPDATE users SET email = ? WHERE id = ?", email, id)
		require.NoError(t, err)
	}
	_, err = before.DB.ExecContext(ctx, `INSERT INTO user_identities (user_id, provider, provider_user_id, email, email_verified)
		VALUES (?, 'github', ?, ?, true)`, nfd.ID, "gh-"+sfx, stored[nfd.ID])
	require.NoError(t, err)
	_, err = before.DB.ExecContext(ctx, "DELETE FROM bun_migrations WHERE name = '20261124010000'")
	require.NoError(t, err)
	login := func(a *apptest.App, email, password string) *apptest.Resp {
		return a.Post("/api/auth/login", "", map[string]any{"email": email, "password": password})
	}
	require.Equal(t, http.StatusUnauthorized, login(before, stored[nfd.ID], nfd.Password).Status, "unreachable before the migration")

	after := apptest.Start(t, cfg) // applies pending migrations
	for _, tc := range []struct {
		user  apptest.User
		typed string
		want  string
	}{
		{nfd, stored[nfd.ID], "n\u00fc-" + sfx + "@probe.test"},
		{ascii, stored[ascii.ID], "x-" + sfx + "@b\u00fccher.example"},
		{owner, stored[owner.ID], stored[owner.ID]},
	} {
		r := login(after, tc.typed, tc.user.Password)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", tc.typed, r.Raw)
		var d authData
		r.Decode(t, &d)
		assert.Equal(t, tc.user.ID, d.UserID, tc.typed)
		assert.Equal(t, tc.want, d.User.Email)
	}
	var email string
	require.NoError(t, after.DB.QueryRowContext(ctx, "SELECT email FROM users WHERE id = ?", twin.ID).Scan(&email))
	assert.Equal(t, stored[twin.ID], email, "a collision is left untouched")
	require.NoError(t, after.DB.QueryRowContext(ctx, "SELECT email FROM user_identities WHERE user_id = ?", nfd.ID).Scan(&email))
	assert.Equal(t, "n\u00fc-"+sfx+"@probe.test", email, "identities too")

	var from string
	var conflict int64
	require.NoError(t, after.DB.QueryRowContext(ctx, `SELECT details->>'from' FROM audit_events
		WHERE action = 'user.email_normalized' AND user_id = ?`, ascii.ID).Scan(&from))
	assert.Equal(t, stored[ascii.ID], from)
	require.NoError(t, after.DB.QueryRowContext(ctx, `SELECT (details->>'conflictsWith')::bigint FROM audit_events
		WHERE action = 'user.email_not_normalized' AND user_id = ?`, twin.ID).Scan(&conflict))
	assert.Equal(t, owner.ID, conflict, fmt.Sprint("users.id ", twin.ID))
}
