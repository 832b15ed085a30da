package auth_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/auth/oauthtest"
	"provisioner/platform/testutil"
)

// resetTokenIn is the token of the reset link in a mail sent by a service whose Frontend:BaseUrl
// is frontend.
func resetTokenIn(t *testing.T, msg string) string {
	t.Helper()
	_, after, found := strings.Cut(msg, frontend+"/auth/reset-password#token=")
	require.True(t, found, msg)
	return strings.Fields(after)[0]
}

// emailVerified is what path (GET /api/me, GET /api/users/{id}) answers as emailVerified.
func emailVerified(t *testing.T, a *apptest.App, path, token string) bool {
	t.Helper()
	r := a.Get(path, token)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var v struct {
		EmailVerified *bool `json:"emailVerified"`
	}
	r.Decode(t, &v)
	require.NotNil(t, v.EmailVerified, "%s answers emailVerified: %s", path, r.Raw)
	return *v.EmailVerified
}

// An account squatted before unverified provider emails were refused: someone signed in with a
// GitHub account whose primary email was the victim's address, unverified, and got an account with
// that address, without a password. The owner of the mailbox could not get it back alone:
// forgot-password mailed nothing to an account without a password, and their own verified GitHub
// sign-in ended on account_exists. Now forgot-password mails a link to set a password; completing
// it proves the address and unlinks the squatter's identity (and any other that does not vouch for
// the address), the squatter's token dies, and the owner's GitHub sign-in links.
func TestPasswordlessSquattedAccountIsReclaimedByMail(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a, p := startOAuth(t, apptest.With(map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port}))
	admin := a.AdminToken(t)
	victim := "reclaim-" + testutil.RandomSuffix() + "@example.test"
	squatter := oauthtest.User{ID: oauthID(), Login: "squat", Email: victim, EmailVerified: false}

	// The state the old sign-up left: an account without a password or proof, and the squatter's
	// unverified identity. Two more identities: a verified Google one with the account's address
	// (kept) and a verified Google one for another address (unlinked: it vouches for another mailbox).
	var id int64
	require.NoError(t, a.DB.QueryRow(`INSERT INTO users (email, full_name, role, security_stamp) VALUES (?, 'Squatter', 'User', 1)
		RETURNING id`, victim).Scan(&id))
	keptGoogle, otherGoogle := "7402"+testutil.RandomSuffix()[:4], "7403"+testutil.RandomSuffix()[:4]
	_, err := a.DB.Exec(`INSERT INTO user_identities (user_id, provider, provider_user_id, email, email_verified)
		VALUES (?, 'github', ?, ?, false), (?, 'google', ?, ?, true), (?, 'google', ?, ?, true)`,
		id, squatter.ID, victim, id, keptGoogle, victim, id, otherGoogle, "elsewhere-"+testutil.RandomSuffix()+"@example.test")
	require.NoError(t, err)

	p.github.SetUser(squatter)
	end := signIn(t, a, browser(t, p), "github", "")
	got, code := signedInAs(t, a, end)
	require.Empty(t, code)
	require.Equal(t, id, got, "the squatter's identity reaches the account")
	squatterToken := fragment(end).Get("access_token")
	assert.False(t, emailVerified(t, a, "/api/me", squatterToken), "the address is not proven")
	assert.False(t, emailVerified(t, a, fmt.Sprintf("/api/users/%d", id), admin))

	// The owner of the mailbox asks for a reset: an account without a password gets a link to set one.
	r := a.Post("/api/auth/forgot-password", "", map[string]any{"email": victim})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	msg := smtp.WaitFor(t, victim, 10*time.Second)
	assert.Contains(t, msg, "set a password for the account", "the mail says a password will be set")
	token := resetTokenIn(t, msg)
	const ownersPassword = "the-mailbox-owners-passphrase-6"
	r = a.Post("/api/auth/reset-password", "", map[string]any{"token": token, "newPassword": ownersPassword})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r = a.Post("/api/auth/reset-password", "", map[string]any{"token": token, "newPassword": "a-second-try-passphrase-2"})
	assert.Equal(t, http.StatusBadRequest, r.Status, "the link is single-use: %s", r.Raw)

	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", squatterToken).Status, "the squatter's token is dead")
	login := a.Post("/api/auth/login", "", map[string]any{"email": victim, "password": ownersPassword})
	require.Equal(t, http.StatusOK, login.Status, string(login.Raw))
	var owner authData
	login.Decode(t, &owner)
	require.Equal(t, id, owner.UserID)
	assert.True(t, emailVerified(t, a, "/api/me", owner.AccessToken), "the reset proved the address")
	assert.True(t, emailVerified(t, a, fmt.Sprintf("/api/users/%d", id), admin))

	var left []string
	rows, err := a.DB.Query("SELECT provider_user_id FROM user_identities WHERE user_id = ? ORDER BY id", id)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		left = append(left, s)
	}
	require.NoError(t, rows.Close())
	assert.Equal(t, []string{keptGoogle}, left, "only the identity that vouches for the address stays")
	var providers string
	require.NoError(t, a.DB.QueryRow(`SELECT details->>'providers' FROM audit_events
		WHERE action = 'user.identity.unlinked' AND user_id = ?`, id).Scan(&providers))
	assert.JSONEq(t, `["GitHub", "Google"]`, providers, "the unlinking is audited")

	// The squatter's GitHub sign-in no longer reaches the account…
	got, code = signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	assert.Equal(t, "email_unverified", code, "signed in as %d", got)
	// …and the owner's own, verified one links to it.
	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "owner", Email: victim, EmailVerified: true})
	got, code = signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	require.Empty(t, code)
	assert.Equal(t, id, got, "the owner's verified identity links to the reclaimed account")
}

// Forgot-password gives one answer for an unknown email, an account with a password and one
// without; each account is mailed its link, an account without a password one to set a password.
func TestForgotPasswordAnswersAlikeAndMailsEveryAccount(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a := apptest.Start(t, apptest.With(map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port, "Frontend:BaseUrl": frontend}))
	withPassword := a.Register(t)
	passwordless := "nopass-" + testutil.RandomSuffix() + "@example.test"
	_, err := a.DB.Exec(`INSERT INTO users (email, full_name, role, security_stamp, email_verified_at) VALUES (?, 'Provider Only', 'User', 1, now())`, passwordless)
	require.NoError(t, err)
	unknown := "nobody-" + testutil.RandomSuffix() + "@example.test"

	var answers []*apptest.Resp
	for _, addr := range []string{unknown, withPassword.Email, passwordless} {
		r := a.Post("/api/auth/forgot-password", "", map[string]any{"email": addr})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		answers = append(answers, r)
	}
	for _, r := range answers[1:] {
		assert.Equal(t, answers[0].Env, r.Env, "the answers must not tell the cases apart")
		assert.Equal(t, answers[0].Header.Get("Content-Length"), r.Header.Get("Content-Length"))
	}

	reset := smtp.WaitFor(t, withPassword.Email, 10*time.Second)
	assert.Contains(t, reset, "choose a new password")
	set := smtp.WaitFor(t, passwordless, 10*time.Second)
	assert.Contains(t, set, "set a password for the account")
	assert.NotContains(t, set, "choose a new password")
	time.Sleep(200 * time.Millisecond)
	assert.Zero(t, smtp.CountTo(unknown), "no mail for an unknown email")

	// The set-password link sets the first password of the account.
	r := a.Post("/api/auth/reset-password", "", map[string]any{"token": resetTokenIn(t, set), "newPassword": "a-first-passphrase-for-it-3"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, http.StatusOK, a.Post("/api/auth/login", "", map[string]any{"email": passwordless, "password": "a-first-passphrase-for-it-3"}).Status)
}
