package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/auth/oauthtest"
	"provisioner/platform/testutil"
)

const frontend = "http://frontend.test"

type providers struct {
	github, google *oauthtest.Provider
}

func startOAuth(t *testing.T, opts ...apptest.Option) (*apptest.App, providers) {
	t.Helper()
	gh, gg := oauthtest.New("github"), oauthtest.New("google")
	t.Cleanup(gh.Close)
	t.Cleanup(gg.Close)
	client := &http.Client{Transport: gg.GoogleTransport(nil)}
	a := apptest.Start(t, append([]apptest.Option{apptest.With(map[string]any{
		"GitHub:ClientId": gh.ClientID, "GitHub:ClientSecret": gh.ClientSecret,
		"GitHub:AuthUrl": gh.URL + "/login/oauth/authorize", "GitHub:TokenUrl": gh.URL + "/login/oauth/access_token",
		"GitHub:ProfileUrl": gh.URL + "/user", "GitHub:EmailUrl": gh.URL + "/user/emails",
		"Google:ClientId": gg.ClientID, "Google:ClientSecret": gg.ClientSecret,
		"Frontend:BaseUrl": frontend, "Frontend:Origins": []string{frontend, "https://app.example.com"},
		"RateLimit:Register": "1000-M",
	}), apptest.WithFx(fx.Supply(fx.Annotate(client, fx.ResultTags(`name:"oauth"`))))}, opts...)...)
	// The service's own address is only known once it listens: callbacks are built from it.
	a.Cfg.Server.PublicUrl = a.URL
	return a, providers{gh, gg}
}

// browser follows redirects like a browser, keeps cookies, maps Google's hosts to the fake, and
// stops at the frontend.
func browser(t *testing.T, p providers) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Transport: p.google.GoogleTransport(nil),
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if strings.HasPrefix(r.URL.String(), frontend) || strings.HasPrefix(r.URL.String(), "https://app.example.com") || strings.HasPrefix(r.URL.String(), "https://evil.test") {
				return http.ErrUseLastResponse
			}
			return nil
		}}
}

// signIn runs the whole round trip and returns the frontend URL the browser ends on.
func signIn(t *testing.T, a *apptest.App, b *http.Client, provider, query string) *url.URL {
	t.Helper()
	res, err := b.Get(a.URL + "/api/auth/login/" + provider + query)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusFound, res.StatusCode, "ends on a redirect to the frontend")
	u, err := url.Parse(res.Header.Get("Location"))
	require.NoError(t, err)
	return u
}

func fragment(u *url.URL) url.Values {
	v, _ := url.ParseQuery(u.Fragment)
	return v
}

func TestOAuthRoundTripBothProviders(t *testing.T) {
	a, p := startOAuth(t)
	var emails []string
	for _, tc := range []struct {
		name string
		fake *oauthtest.Provider
	}{{"github", p.github}, {"Google", p.google}} {
		t.Run(tc.name, func(t *testing.T) {
			email := "octo-" + testutil.RandomSuffix() + "@example.test"
			emails = append(emails, email)
			pid := oauthID()
			tc.fake.SetUser(oauthtest.User{ID: pid, Login: "octo", Name: "Octo Cat", Email: email, EmailVerified: true})
			// PKCE and state are on the way to the provider.
			res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(a.URL + "/api/auth/login/" + tc.name)
			require.NoError(t, err)
			res.Body.Close()
			loc, _ := url.Parse(res.Header.Get("Location"))
			assert.Equal(t, "S256", loc.Query().Get("code_challenge_method"))
			assert.NotEmpty(t, loc.Query().Get("code_challenge"))
			assert.NotEmpty(t, loc.Query().Get("state"))
			assert.NotEqual(t, "offline", loc.Query().Get("access_type"), "no refresh token is asked for: sign-in keeps no provider token")
			assert.Equal(t, a.URL+"/api/auth/callback/"+strings.ToLower(tc.name), loc.Query().Get("redirect_uri"))
			cookie := res.Cookies()[0]
			assert.True(t, cookie.HttpOnly)
			assert.Equal(t, http.SameSiteLaxMode, cookie.SameSite)
			assert.Equal(t, 600, cookie.MaxAge)

			end := signIn(t, a, browser(t, p), tc.name, "")
			assert.Equal(t, frontend+"/auth/callback", end.Scheme+"://"+end.Host+end.Path)
			assert.Empty(t, end.RawQuery, "the token travels in the fragment, not the query")
			f := fragment(end)
			require.NotEmpty(t, f.Get("access_token"), end.String())
			assert.NotEmpty(t, f.Get("expires_at"))
			assert.Equal(t, map[string]string{"github": "GitHub", "Google": "Google"}[tc.name], f.Get("provider"))

			me := a.Get("/api/me", f.Get("access_token"))
			require.Equal(t, http.StatusOK, me.Status, string(me.Raw))
			assert.Contains(t, string(me.Raw), email)
			assert.Contains(t, string(me.Raw), `"providerUserId":"`+pid+`"`)

			// Signing in again finds the same account by its identity.
			again := fragment(signIn(t, a, browser(t, p), tc.name, ""))
			var id1, id2 struct{ ID int64 }
			a.Get("/api/me", f.Get("access_token")).Decode(t, &id1)
			a.Get("/api/me", again.Get("access_token")).Decode(t, &id2)
			assert.Equal(t, id1.ID, id2.ID)
		})
	}
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events e JOIN users u ON u.id = e.user_id WHERE e.action = 'user.registered' "+
		"AND e.details->>'provider' IN ('GitHub', 'Google') AND u.email IN (?, ?)", emails[0], emails[1]).Scan(&n))
	assert.Equal(t, 2, n)
}

// signedInAs is the account id a finished sign-in reached, or 0 with the error code.
func signedInAs(t *testing.T, a *apptest.App, end *url.URL) (int64, string) {
	t.Helper()
	f := fragment(end)
	if f.Get("error") != "" {
		require.Empty(t, f.Get("access_token"), end.String())
		return 0, f.Get("error")
	}
	var me struct{ ID int64 }
	r := a.Get("/api/me", f.Get("access_token"))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &me)
	return me.ID, ""
}

func countRows(t *testing.T, a *apptest.App, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, a.DB.QueryRow(query, args...).Scan(&n))
	return n
}

// Pre-account takeover through a provider that has not verified the email: a GitHub account whose
// primary email is someone else's address, unverified, makes no account (email_unverified); the
// mailbox's owner then signs in with their own verified GitHub account to an account of their own,
// which the squatter's identity does not reach.
func TestOAuthUnverifiedEmailCreatesNoAccount(t *testing.T) {
	a, p := startOAuth(t)
	before := countRows(t, a, "SELECT coalesce(max(id), 0) FROM audit_events")
	victim := "owner-" + testutil.RandomSuffix() + "@example.test"
	squatter := oauthtest.User{ID: oauthID(), Login: "squat", Email: victim, EmailVerified: false}
	p.github.SetUser(squatter)
	id, code := signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	assert.Equal(t, "email_unverified", code, "no account from an unverified email (signed in as %d)", id)
	assert.Zero(t, countRows(t, a, "SELECT count(*) FROM users WHERE email = ?", victim), "the address is not squatted")

	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "owner", Email: victim, EmailVerified: true})
	owner, code := signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	require.Empty(t, code)
	require.NotZero(t, owner)

	p.github.SetUser(squatter)
	again, code := signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	assert.Equal(t, "email_unverified", code, "the squatter's identity reaches no account (signed in as %d)", again)
	assert.NotEqual(t, owner, again)
	assert.Zero(t, countRows(t, a, "SELECT count(*) FROM user_identities WHERE provider_user_id = ?", squatter.ID))
	assert.Equal(t, 2, countRows(t, a, `SELECT count(*) FROM audit_events WHERE action = 'user.login.failed'
		AND details->>'provider' = 'GitHub' AND details->>'reason' = 'email_unverified' AND id > ?`, before),
		"both refused sign-ins are audited, as a refused password is")
}

// Pre-account takeover through a password registration: an attacker registers the victim's address
// with a password (which never proves the address). The victim's verified GitHub sign-in is not
// linked into it: it is refused (account_exists) until the mailbox's owner proves the address
// by a password reset through the mailed link: then the same sign-in links, and the attacker's
// password and earlier tokens are dead.
func TestOAuthDoesNotLinkAnAccountWhoseEmailIsNotProven(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a, p := startOAuth(t, apptest.With(map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port}))
	attacker := a.Register(t) // the victim's address, registered by someone else
	victim := oauthtest.User{ID: oauthID(), Login: "victim", Email: attacker.Email, EmailVerified: true}
	p.github.SetUser(victim)
	id, code := signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	assert.Equal(t, "account_exists", code, "not linked into an account whose email is unproven (signed in as %d)", id)
	assert.Zero(t, countRows(t, a, "SELECT count(*) FROM user_identities WHERE user_id = ?", attacker.ID), "nothing linked")
	assert.Equal(t, 1, countRows(t, a, "SELECT count(*) FROM users WHERE email = ?", attacker.Email), "no second account either")

	// The owner of the mailbox takes the account over by a reset, then the provider links.
	require.Equal(t, http.StatusOK, a.Post("/api/auth/forgot-password", "", map[string]any{"email": attacker.Email}).Status)
	msg := smtp.WaitFor(t, attacker.Email, 10*time.Second)
	_, after, found := strings.Cut(msg, "/auth/reset-password#token=")
	require.True(t, found, msg)
	r := a.Post("/api/auth/reset-password", "", map[string]any{"token": strings.Fields(after)[0], "newPassword": "the-owners-own-passphrase-3"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))

	id, code = signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	require.Empty(t, code, "the reset proved the address")
	assert.Equal(t, attacker.ID, id, "linked to the account now proven")
	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", attacker.Token).Status, "the attacker's token is dead")
	assert.Equal(t, http.StatusUnauthorized, a.Post("/api/auth/login", "", map[string]any{"email": attacker.Email, "password": attacker.Password}).Status)
	assert.Equal(t, 1, countRows(t, a, "SELECT count(*) FROM audit_events WHERE action = 'user.identity.linked' AND user_id = ?", attacker.ID))
}

// An account whose email is proven (made from Google's verified email) is linked when the same
// verified address signs in with GitHub; its password, if any, keeps working.
func TestOAuthLinksAVerifiedEmailToAProvenAccount(t *testing.T) {
	a, p := startOAuth(t)
	addr := "both-" + testutil.RandomSuffix() + "@example.test"
	p.google.SetUser(oauthtest.User{ID: oauthID(), Email: addr, EmailVerified: true})
	first, code := signedInAs(t, a, signIn(t, a, browser(t, p), "google", ""))
	require.Empty(t, code)

	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "both", Email: addr, EmailVerified: false})
	_, code = signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	assert.Equal(t, "email_unverified", code, "an unverified email never links")

	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "both", Email: addr, EmailVerified: true})
	second, code := signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	require.Empty(t, code)
	assert.Equal(t, first, second, "a verified email links to the proven account")
	assert.Equal(t, 1, countRows(t, a, "SELECT count(*) FROM audit_events WHERE action = 'user.identity.linked' AND user_id = ?", first))

	// An admin's change of the email un-proves it: the new address's owner has proven nothing.
	moved := "moved-" + testutil.RandomSuffix() + "@example.test"
	r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", first), Token: a.AdminToken(t), Body: map[string]any{"email": moved}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "moved", Email: moved, EmailVerified: true})
	_, code = signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	assert.Equal(t, "account_exists", code, "not linked after an admin changed the email")
}

func TestOAuthStateChecks(t *testing.T) {
	a, p := startOAuth(t)
	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "s", Email: "state-" + testutil.RandomSuffix() + "@example.test", EmailVerified: true})
	noFollow := func(jar http.CookieJar) *http.Client {
		return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	jar, _ := cookiejar.New(nil)
	c := noFollow(jar)
	res, err := c.Get(a.URL + "/api/auth/login/github")
	require.NoError(t, err)
	res.Body.Close()
	toProvider := res.Header.Get("Location")
	res, err = c.Get(toProvider)
	require.NoError(t, err)
	res.Body.Close()
	callback := res.Header.Get("Location")
	cb, _ := url.Parse(callback)

	cases := []struct {
		name string
		do   func() *http.Response
	}{
		{"missing state", func() *http.Response {
			q := cb.Query()
			q.Del("state")
			u := *cb
			u.RawQuery = q.Encode()
			r, _ := c.Get(u.String())
			return r
		}},
		{"wrong state", func() *http.Response {
			q := cb.Query()
			q.Set("state", "forged-state")
			u := *cb
			u.RawQuery = q.Encode()
			r, _ := c.Get(u.String())
			return r
		}},
		{"no cookie (CSRF: another browser)", func() *http.Response {
			r, _ := noFollow(nil).Get(callback)
			return r
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.do()
			require.NotNil(t, r)
			r.Body.Close()
			require.Equal(t, http.StatusFound, r.StatusCode)
			loc, _ := url.Parse(r.Header.Get("Location"))
			assert.Equal(t, "invalid_state", fragment(loc).Get("error"))
		})
	}

	// The genuine callback works once…
	jar2, _ := cookiejar.New(nil)
	c2 := noFollow(jar2)
	res, _ = c2.Get(a.URL + "/api/auth/login/github")
	res.Body.Close()
	res, _ = c2.Get(res.Header.Get("Location"))
	res.Body.Close()
	genuine := res.Header.Get("Location")
	cookies := jar2.Cookies(mustURL(a.URL + "/api/auth/callback/github"))
	res, _ = c2.Get(genuine)
	res.Body.Close()
	loc, _ := url.Parse(res.Header.Get("Location"))
	require.NotEmpty(t, fragment(loc).Get("access_token"), loc.String())
	// …and a replay of it (same cookie, same state, same code) is refused.
	req, _ := http.NewRequest("GET", genuine, nil)
	for _, ck := range cookies {
		req.AddCookie(ck)
	}
	res, err = noFollow(nil).Do(req)
	require.NoError(t, err)
	res.Body.Close()
	loc, _ = url.Parse(res.Header.Get("Location"))
	assert.Equal(t, "invalid_state", fragment(loc).Get("error"), "a reused state is refused")
	assert.Equal(t, 1, p.github.Exchanges(), "the replayed code never reached the provider")
}

func mustURL(s string) *url.URL { u, _ := url.Parse(s); return u }

func TestOAuthProviderErrorsAndReturnURL(t *testing.T) {
	a, p := startOAuth(t)
	p.google.SetUser(oauthtest.User{ID: oauthID(), Email: "ret-" + testutil.RandomSuffix() + "@example.test", EmailVerified: true})

	end := signIn(t, a, browser(t, p), "google", "?returnUrl="+url.QueryEscape("https://app.example.com/dashboard?tab=1"))
	assert.Equal(t, "https://app.example.com/dashboard?tab=1", end.Scheme+"://"+end.Host+end.Path+"?"+end.RawQuery, "an allowed returnUrl is kept")
	assert.NotEmpty(t, fragment(end).Get("access_token"))

	end = signIn(t, a, browser(t, p), "google", "?returnUrl="+url.QueryEscape("https://evil.test/steal"))
	assert.Equal(t, frontend, end.Scheme+"://"+end.Host, "a foreign returnUrl is ignored")

	p.google.Deny = true
	end = signIn(t, a, browser(t, p), "google", "")
	assert.Equal(t, "access_denied", fragment(end).Get("error"))
	p.google.Deny = false

	p.google.TokenStatus = http.StatusInternalServerError
	end = signIn(t, a, browser(t, p), "google", "")
	assert.Equal(t, "provider_error", fragment(end).Get("error"))
	p.google.TokenStatus = 0

	for _, bad := range []string{"gitlab", "nope"} {
		r := a.Get("/api/auth/login/"+bad, "")
		assert.Equal(t, http.StatusNotFound, r.Status)
		assert.False(t, r.Env.Success)
	}
	// Any case works.
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(a.URL + "/api/auth/login/GitHub")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusFound, res.StatusCode)
}

func TestOAuthUnconfiguredProviderIs404(t *testing.T) {
	a := apptest.Start(t)
	assert.Equal(t, http.StatusNotFound, a.Get("/api/auth/login/github", "").Status)
	assert.Equal(t, http.StatusNotFound, a.Get("/api/auth/callback/google?code=x&state=y", "").Status)
}

// An admin deletes an account made by signing in with GitHub: the same GitHub account signs up
// afresh (as a deleted password account's email may register again), with a new id and none of
// the deleted account's resources, and it is that new account from then on.
func TestOAuthDeletedUserSignsUpAfresh(t *testing.T) {
	a, p := startOAuth(t)
	admin := a.AdminToken(t)
	email := "gone-" + testutil.RandomSuffix() + "@example.test"
	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "gone", Name: "Gone Soon", Email: email, EmailVerified: true})

	first := fragment(signIn(t, a, browser(t, p), "github", ""))
	require.NotEmpty(t, first.Get("access_token"))
	var old struct{ ID int64 }
	a.Get("/api/me", first.Get("access_token")).Decode(t, &old)
	r := a.Post("/api/me/ai-keys", first.Get("access_token"), map[string]any{"name": "of the deleted account"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/users/%d", old.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))

	again := fragment(signIn(t, a, browser(t, p), "github", ""))
	require.Empty(t, again.Get("error"), "the deleted account's identity no longer binds")
	require.NotEmpty(t, again.Get("access_token"))
	r = a.Get("/api/me", again.Get("access_token"))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var fresh struct {
		ID             int64
		Email          string
		Provider       string
		ProviderUserID string
	}
	r.Decode(t, &fresh)
	assert.NotEqual(t, old.ID, fresh.ID, "a new account, not the deleted one revived")
	assert.Equal(t, email, fresh.Email)
	assert.Equal(t, "GitHub", fresh.Provider)
	keys := a.Get("/api/me/ai-keys", again.Get("access_token"))
	require.Equal(t, http.StatusOK, keys.Status)
	assert.JSONEq(t, `[]`, string(keys.Env.Data), "a clean slate: nothing of the deleted account")
	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", first.Get("access_token")).Status, "the deleted account stays deleted")

	// From now on the GitHub account is the new one.
	third := fragment(signIn(t, a, browser(t, p), "github", ""))
	var same struct{ ID int64 }
	a.Get("/api/me", third.Get("access_token")).Decode(t, &same)
	assert.Equal(t, fresh.ID, same.ID)
	var unlinked, registered int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'user.identity.unlinked' AND target_id = ?", fmt.Sprint(old.ID)).Scan(&unlinked))
	assert.Equal(t, 1, unlinked, "the unlinking of the deleted account's identity is audited")
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'user.registered' AND user_id = ?", fresh.ID).Scan(&registered))
	assert.Equal(t, 1, registered)
}

// A database failure while finding the account of a known identity is not a disabled account:
// the frontend is told the service is temporarily unavailable (RFC 6749's code), not
// account_disabled, and the same sign-in works once the database answers.
func TestOAuthDatabaseFailureIsTemporarilyUnavailable(t *testing.T) {
	a, p := startOAuth(t)
	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "db", Email: "db-" + testutil.RandomSuffix() + "@example.test", EmailVerified: true})
	first := fragment(signIn(t, a, browser(t, p), "github", ""))
	require.NotEmpty(t, first.Get("access_token"))

	// Another session holds the users table: the account lookup gets no answer and fails once the
	// database I/O bound (5 s) passes, the way a hung database fails it.
	tx, err := a.DB.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	_, err = tx.Exec("LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	end := signIn(t, a, browser(t, p), "github", "")
	require.NoError(t, tx.Rollback())
	assert.Equal(t, "temporarily_unavailable", fragment(end).Get("error"), end.String())

	again := fragment(signIn(t, a, browser(t, p), "github", ""))
	assert.NotEmpty(t, again.Get("access_token"), "signs in once the database answers")
}

// A provider's profile name is not ours to refuse, but what a typed fullName may not hold (control,
// bidi-override, invisible format characters) is dropped from it before it is stored.
func TestOAuthNameLosesDeceptiveCharacters(t *testing.T) {
	a, p := startOAuth(t)
	email := "bidi-" + testutil.RandomSuffix() + "@example.test"
	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "bidi", Name: "\u202eOcto\u0007 C\u200bat\u001b[2J",
		Email: email, EmailVerified: true})
	id, code := signedInAs(t, a, signIn(t, a, browser(t, p), "github", ""))
	require.Empty(t, code)
	var name string
	require.NoError(t, a.DB.QueryRow("SELECT full_name FROM users WHERE id = ?", id).Scan(&name))
	assert.Equal(t, "Octo Cat[2J", name)
}

// A provider profile without a usable id (GitHub's "id" missing or 0, which goth turns into "0";
// Google's missing, blank or "0") signs no one in (provider_error) and stores no account and no
// identity, so two such profiles never share one.
func TestOAuthProfileWithoutIDSignsNoOneIn(t *testing.T) {
	a, p := startOAuth(t)
	for _, tc := range []struct {
		provider string
		fake     *oauthtest.Provider
		id       string
	}{{"github", p.github, ""}, {"github", p.github, "0"}, {"google", p.google, "0"}, {"google", p.google, " "}, {"google", p.google, ""}} {
		t.Run(fmt.Sprintf("%s id %q", tc.provider, tc.id), func(t *testing.T) {
			var emails []string
			for _, who := range []string{"first", "second"} {
				email := who + "-noid-" + testutil.RandomSuffix() + "@example.test"
				emails = append(emails, email)
				tc.fake.SetUser(oauthtest.User{ID: tc.id, Login: who, Name: who, Email: email, EmailVerified: true})
				id, code := signedInAs(t, a, signIn(t, a, browser(t, p), tc.provider, ""))
				assert.Equal(t, "provider_error", code, "%s is signed in to no account (got %d)", who, id)
			}
			assert.Zero(t, countRows(t, a, "SELECT count(*) FROM users WHERE email IN (?, ?)", emails[0], emails[1]), "no account made")
			assert.Zero(t, countRows(t, a, "SELECT count(*) FROM user_identities WHERE provider = ? AND btrim(provider_user_id) IN ('', '0')", tc.provider), "no identity stored")
		})
	}
}

// oauthIDs numbers the provider user ids of the package's tests.
var oauthIDs atomic.Int64

// oauthID is a fresh provider user id, never given twice in the process (whose tests share one
// control database, also under -count > 1): a number, as GitHub's are (the fake reads only the
// digits an id starts with, so "4242"+RandomSuffix() was 4242 more than a third of the time) and
// as Google's are.
func oauthID() string { return fmt.Sprint(1_000_000 + oauthIDs.Add(1)) }

// raceCallbacks runs n sign-ins with the fake's current user up to the provider's redirect back,
// then sends the n callbacks together while the users table is locked, so that every one of them
// has found no identity and waits at the account's lookup by email (seen in pg_stat_activity);
// then it releases them at once. It returns the account each reached, or the error code.
func raceCallbacks(t *testing.T, a *apptest.App, n int, email string) (ids []int64, codes []string) {
	t.Helper()
	type flow struct {
		client   *http.Client
		callback string
	}
	flows := make([]flow, n)
	for i := range flows {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := c.Get(a.URL + "/api/auth/login/github")
		require.NoError(t, err)
		res.Body.Close()
		res, err = c.Get(res.Header.Get("Location"))
		require.NoError(t, err)
		res.Body.Close()
		require.Contains(t, res.Header.Get("Location"), "/api/auth/callback/github")
		flows[i] = flow{c, res.Header.Get("Location")}
	}
	ctx := context.Background()
	lock, err := a.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = lock.ExecContext(ctx, "LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	ends := make([]*url.URL, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := f.client.Get(f.callback)
			if err != nil {
				errs[i] = err
				return
			}
			res.Body.Close()
			ends[i], errs[i] = url.Parse(res.Header.Get("Location"))
		}()
	}
	waiting := 0
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		// The lock's own session is not in a Lock wait; the callbacks' lookups name the email.
		require.NoError(t, a.DB.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock' AND position(? in query) > 0`, email).Scan(&waiting))
		if waiting == n {
			break
		}
	}
	require.NoError(t, lock.Rollback())
	wg.Wait()
	require.Equal(t, n, waiting, "every callback waited at the account's lookup, past the identity's")
	for i := range flows {
		require.NoError(t, errs[i])
		id, code := signedInAs(t, a, ends[i])
		ids, codes = append(ids, id), append(codes, code)
	}
	return ids, codes
}

// Parallel first sign-ins with one new GitHub identity all reach the one account they create: none
// ends on #error=account_exists or server_error.
func TestOAuthParallelFirstSignInsReachOneAccount(t *testing.T) {
	a, p := startOAuth(t)
	const n = 4
	email := "race-" + testutil.RandomSuffix() + "@example.test"
	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "race", Email: email, EmailVerified: true})
	ids, codes := raceCallbacks(t, a, n, email)
	assert.Equal(t, make([]string, n), codes, "no callback fails")
	for _, id := range ids {
		assert.Equal(t, ids[0], id, "every callback reaches the same account: %v", ids)
	}
	assert.Equal(t, 1, countRows(t, a, "SELECT count(*) FROM users WHERE email = ?", email))
	assert.Equal(t, 1, countRows(t, a, "SELECT count(*) FROM user_identities WHERE email = ?", email))
	assert.Equal(t, 1, countRows(t, a, "SELECT count(*) FROM audit_events WHERE action = 'user.registered' AND user_id = ?", ids[0]))
}

// Parallel sign-ins linking one new GitHub identity to an existing proven account (same verified
// email) all reach that account: none ends on #error=server_error.
func TestOAuthParallelLinksReachOneAccount(t *testing.T) {
	a, p := startOAuth(t)
	const n = 4
	email := "racelink-" + testutil.RandomSuffix() + "@example.test"
	p.google.SetUser(oauthtest.User{ID: oauthID(), Email: email, EmailVerified: true})
	owner, code := signedInAs(t, a, signIn(t, a, browser(t, p), "google", ""))
	require.Empty(t, code)
	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "racelink", Email: email, EmailVerified: true})
	ids, codes := raceCallbacks(t, a, n, email)
	assert.Equal(t, make([]string, n), codes, "no callback fails")
	for _, id := range ids {
		assert.Equal(t, owner, id, "every callback reaches the proven account")
	}
	assert.Equal(t, 1, countRows(t, a, "SELECT count(*) FROM user_identities WHERE provider = 'github' AND user_id = ?", owner))
	assert.Equal(t, 1, countRows(t, a, "SELECT count(*) FROM audit_events WHERE action = 'user.identity.linked' AND user_id = ?", owner))
}
