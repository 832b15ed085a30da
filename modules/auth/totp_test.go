package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/auth/oauthtest"
	"provisioner/platform/testutil"
)

// code is the TOTP code of secret at at, as an authenticator app computes it.
func code(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	c, err := totp.GenerateCode(secret, at)
	require.NoError(t, err)
	return c
}

// wrongCode is six digits that are no code of secret now or in the steps next to it.
func wrongCode(t *testing.T, secret string) string {
	valid := map[string]bool{}
	for _, d := range []time.Duration{-30 * time.Second, 0, 30 * time.Second} {
		valid[code(t, secret, time.Now().Add(d))] = true
	}
	for i := 0; ; i++ {
		c := fmt.Sprintf("%06d", 123456+i)
		if !valid[c] {
			return c
		}
	}
}

type enrolment struct {
	Secret     string `json:"secret"`
	OtpauthURI string `json:"otpauthUri"`
}

// enrolTOTP turns TOTP on for the session of token; it answers the secret, the code it verified
// and the recovery codes.
func enrolTOTP(t *testing.T, a *apptest.App, token string) (e enrolment, verified string, recovery []string) {
	t.Helper()
	r := a.Post("/api/me/mfa/totp", token, nil)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	r.Decode(t, &e)
	verified = code(t, e.Secret, time.Now())
	r = a.Post("/api/me/mfa/totp/verify", token, map[string]any{"code": verified})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var codes struct {
		RecoveryCodes []string `json:"recoveryCodes"`
	}
	r.Decode(t, &codes)
	return e, verified, codes.RecoveryCodes
}

func completeMFA(a *apptest.App, mfaToken, code string) *apptest.Resp {
	return a.Post("/api/auth/mfa", "", map[string]any{"mfaToken": mfaToken, "code": code})
}

func TestTOTPEnrolmentAndSignIn(t *testing.T) {
	a := apptest.Start(t, apptest.With(noLoginLimit))
	u, first := register(t, a)

	r := a.Post("/api/me/mfa/totp/verify", first.AccessToken, map[string]any{"code": "123456"})
	assert.Equal(t, http.StatusConflict, r.Status, "no enrolment yet: %s", r.Raw)
	r = a.Post("/api/me/mfa/totp", first.AccessToken, nil)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var e enrolment
	r.Decode(t, &e)
	uri, err := url.Parse(e.OtpauthURI)
	require.NoError(t, err)
	assert.Equal(t, "otpauth", uri.Scheme)
	assert.Equal(t, "totp", uri.Host)
	assert.Equal(t, "/Provisioner:"+u.Email, uri.Path)
	assert.Equal(t, e.Secret, uri.Query().Get("secret"))
	assert.Equal(t, "Provisioner", uri.Query().Get("issuer"))
	var sealed string
	require.NoError(t, a.DB.QueryRowContext(context.Background(), "SELECT secret_sealed FROM user_totp WHERE user_id = ?", u.ID).Scan(&sealed))
	assert.NotContains(t, sealed, e.Secret, "the secret is sealed at rest")

	r = a.Post("/api/me/mfa/totp/verify", first.AccessToken, map[string]any{"code": wrongCode(t, e.Secret)})
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.Equal(t, []string{"code"}, r.Fields())
	assert.False(t, login(t, a, u.Email, u.Password).MFARequired, "not in force before it is verified")

	verified := code(t, e.Secret, time.Now())
	r = a.Post("/api/me/mfa/totp/verify", first.AccessToken, map[string]any{"code": verified})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var codes struct {
		RecoveryCodes []string `json:"recoveryCodes"`
	}
	r.Decode(t, &codes)
	require.Len(t, codes.RecoveryCodes, 10)
	distinct := map[string]bool{}
	for _, c := range codes.RecoveryCodes {
		assert.Regexp(t, regexp.MustCompile(`^[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}$`), c)
		distinct[c] = true
	}
	assert.Len(t, distinct, 10)
	assert.Equal(t, http.StatusConflict, a.Post("/api/me/mfa/totp", first.AccessToken, nil).Status, "already on")
	assert.Equal(t, "aal2", currentSession(t, a, first.AccessToken).MFALevel, "verifying passed the second factor")

	// A password sign-in now stops at the second factor.
	r = a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	pending := decodeTokens(t, r)
	assert.True(t, pending.MFARequired)
	assert.NotEmpty(t, pending.MFAToken)
	assert.NotContains(t, string(r.Raw), "accessToken")
	assert.NotContains(t, string(r.Raw), "refreshToken")

	assert.Equal(t, http.StatusUnauthorized, completeMFA(a, pending.MFAToken, verified).Status, "a code is accepted once")
	assert.Equal(t, http.StatusUnauthorized, completeMFA(a, "not-a-token", code(t, e.Secret, time.Now())).Status)
	// The next step's code (the authenticator a little ahead) is within the window and not used yet.
	r = completeMFA(a, pending.MFAToken, code(t, e.Secret, time.Now().Add(30*time.Second)))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	signedIn := decodeTokens(t, r)
	assert.Equal(t, http.StatusOK, a.Get("/api/me", signedIn.AccessToken).Status)
	current := currentSession(t, a, signedIn.AccessToken)
	assert.Equal(t, "aal2", current.MFALevel)
	assert.NotNil(t, current.MFAAt)
	assert.Equal(t, http.StatusUnauthorized, completeMFA(a, pending.MFAToken, codes.RecoveryCodes[0]).Status, "the mfaToken is spent")

	// A recovery code signs in once, typed in any case and with or without its dashes.
	pending = decodeTokens(t, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password}))
	typed := strings.ToUpper(strings.ReplaceAll(codes.RecoveryCodes[0], "-", ""))
	require.Equal(t, http.StatusOK, completeMFA(a, pending.MFAToken, typed).Status)
	pending = decodeTokens(t, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password}))
	assert.Equal(t, http.StatusUnauthorized, completeMFA(a, pending.MFAToken, codes.RecoveryCodes[0]).Status, "used")

	// Turning it off takes a code; sign-ins then need none.
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: "/api/me/mfa/totp", Token: signedIn.AccessToken, Body: map[string]any{"code": "nope-nope"}})
	assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: "/api/me/mfa/totp", Token: signedIn.AccessToken, Body: map[string]any{"code": codes.RecoveryCodes[1]}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.False(t, login(t, a, u.Email, u.Password).MFARequired)
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: "/api/me/mfa/totp", Token: signedIn.AccessToken, Body: map[string]any{"code": codes.RecoveryCodes[2]}})
	assert.Equal(t, http.StatusConflict, r.Status, "already off")

	var actions []string
	rows, err := a.DB.QueryContext(context.Background(), "SELECT action FROM audit_events WHERE user_id = ? AND action LIKE 'user.mfa.%' ORDER BY id", u.ID)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		actions = append(actions, s)
	}
	require.NoError(t, rows.Close())
	assert.Equal(t, []string{"user.mfa.totp.enrolment_started", "user.mfa.failed", "user.mfa.totp.enabled",
		"user.mfa.failed", "user.mfa.totp.disabled"}, actions)
}

// TestWrongCodesAreLockedOutLikePasswords: codes are counted per user before they are checked; past
// the threshold further codes wait, whichever sign-in or route they come through.
func TestWrongCodesAreLockedOutLikePasswords(t *testing.T) {
	kv := map[string]any{"Auth:LockoutThreshold": 3, "Auth:LockoutDelaySeconds": 600}
	for k, v := range noLoginLimit {
		kv[k] = v
	}
	a := apptest.Start(t, apptest.With(kv))
	u, first := register(t, a)
	e, _, recovery := enrolTOTP(t, a, first.AccessToken)
	pending := decodeTokens(t, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password}))
	bad := wrongCode(t, e.Secret)
	assert.Equal(t, http.StatusUnauthorized, completeMFA(a, pending.MFAToken, bad).Status)
	assert.Equal(t, http.StatusUnauthorized, completeMFA(a, pending.MFAToken, "wrong-recovery-code").Status)
	r := a.Post("/api/me/mfa/step-up", first.AccessToken, map[string]any{"code": bad})
	assert.Equal(t, http.StatusBadRequest, r.Status, "the third failure, through another route")
	r = completeMFA(a, pending.MFAToken, recovery[0])
	assert.Equal(t, http.StatusTooManyRequests, r.Status, "a right code waits too: %s", r.Raw)
	assert.InDelta(t, 600, retryAfter(t, r), 60)
	r = a.Post("/api/me/mfa/step-up", first.AccessToken, map[string]any{"code": recovery[0]})
	assert.Equal(t, http.StatusTooManyRequests, r.Status)
	var used int
	require.NoError(t, a.DB.QueryRowContext(context.Background(),
		"SELECT count(*) FROM user_recovery_codes WHERE user_id = ? AND used_at IS NOT NULL", u.ID).Scan(&used))
	assert.Zero(t, used, "the refused attempts checked nothing")
}

// TestRevealingADatabasePasswordNeedsARecentSecondFactor: with TOTP on, a session that has not
// passed the second factor within Auth:StepUpMinutes gets a 403 until it steps up.
func TestRevealingADatabasePasswordNeedsARecentSecondFactor(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:TenantPostgres": testutil.TenantPostgresURL(t),
		"RateLimit:PasswordReveal": "1000-M"}))
	r := a.Post("/api/auth/register", "", map[string]any{"fullName": "Step Up", "email": "step-" + testutil.RandomSuffix() + "@example.test",
		"password": goodPassword})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var reg struct {
		tokens
		TenantDatabase struct {
			ID     int64  `json:"databaseInstanceId"`
			Status string `json:"status"`
		} `json:"tenantDatabase"`
	}
	r.Decode(t, &reg)
	require.Equal(t, "Active", reg.TenantDatabase.Status, string(r.Raw))
	var email string
	require.NoError(t, a.DB.QueryRowContext(context.Background(), "SELECT email FROM users WHERE id = ?", reg.UserID).Scan(&email))
	reveal := fmt.Sprintf("/api/me/databases/%d/password", reg.TenantDatabase.ID)

	before := login(t, a, email, goodPassword) // a session from before TOTP was on
	require.Equal(t, http.StatusOK, a.Get(reveal, before.AccessToken).Status, "no second factor, no step-up")
	_, _, recovery := enrolTOTP(t, a, reg.AccessToken)

	r = a.Get(reveal, before.AccessToken)
	assert.Equal(t, http.StatusForbidden, r.Status, string(r.Raw))
	assert.Contains(t, r.Env.Message, "POST /api/me/mfa/step-up")
	assert.NotContains(t, string(r.Raw), "password\":")
	assert.Equal(t, http.StatusOK, a.Get(reveal, reg.AccessToken).Status, "the session that turned TOTP on passed it just now")

	r = a.Post("/api/me/mfa/step-up", before.AccessToken, map[string]any{"code": recovery[0]})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var up struct {
		MFAAt      time.Time `json:"mfaAt"`
		ValidUntil time.Time `json:"validUntil"`
	}
	r.Decode(t, &up)
	assert.Equal(t, 10*time.Minute, up.ValidUntil.Sub(up.MFAAt), "Auth:StepUpMinutes")
	r = a.Get(reveal, before.AccessToken)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"password":`)
}

// TestOAuthSignInOfAUserWithTOTPStopsAtTheSecondFactor: the callback's fragment carries the
// mfaToken instead of tokens; POST /api/auth/mfa completes it as a GitHub session.
func TestOAuthSignInOfAUserWithTOTPStopsAtTheSecondFactor(t *testing.T) {
	a, p := startOAuth(t)
	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "octo", Name: "Octo", Email: "octo-" + testutil.RandomSuffix() + "@example.test", EmailVerified: true})

	first := fragment(signIn(t, a, browser(t, p), "github", ""))
	require.NotEmpty(t, first.Get("access_token"), first.Encode())
	require.NotEmpty(t, first.Get("refresh_token"))
	_, err := time.Parse(time.RFC3339, first.Get("refresh_expires_at"))
	require.NoError(t, err)
	e, _, _ := enrolTOTP(t, a, first.Get("access_token"))

	second := fragment(signIn(t, a, browser(t, p), "github", ""))
	assert.Equal(t, "true", second.Get("mfa_required"))
	assert.Empty(t, second.Get("access_token"))
	assert.Empty(t, second.Get("refresh_token"))
	assert.Equal(t, "GitHub", second.Get("provider"))
	r := completeMFA(a, second.Get("mfa_token"), code(t, e.Secret, time.Now().Add(30*time.Second)))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	tk := decodeTokens(t, r)
	assert.Equal(t, "GitHub", tk.Provider)
	assert.Equal(t, "GitHub", currentSession(t, a, tk.AccessToken).Provider)
	r = refresh(a, tk.RefreshToken)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"provider":"GitHub"`)
}

// TestVerifyingAnEnrolmentStartedAgainMeanwhileIsRefused: while a code of the enrolment's secret
// is being checked, the enrolment is started again (another tab) with another secret. TOTP is not
// turned on with a secret the user never checked: 409, still off.
func TestVerifyingAnEnrolmentStartedAgainMeanwhileIsRefused(t *testing.T) {
	a := apptest.Start(t, apptest.With(noLoginLimit))
	u, first := register(t, a)
	r := a.Post("/api/me/mfa/totp", first.AccessToken, nil)
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var e enrolment
	r.Decode(t, &e)

	// Hold the enrolment's row so that the verification waits after reading the secret.
	ctx := context.Background()
	hold, err := a.DB.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer hold.Rollback() //nolint:errcheck
	_, err = hold.ExecContext(ctx, "SELECT 1 FROM user_totp WHERE user_id = ? FOR UPDATE", u.ID)
	require.NoError(t, err)
	answered := make(chan *apptest.Resp, 1)
	go func() {
		answered <- a.Post("/api/me/mfa/totp/verify", first.AccessToken, map[string]any{"code": code(t, e.Secret, time.Now())})
	}()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%user_totp%'").Scan(&n))
		return n > 0
	}, 30*time.Second, 10*time.Millisecond, "the verification waits for the row")
	// What a second POST /api/me/mfa/totp stores: another secret, no step accepted yet.
	_, err = hold.ExecContext(ctx, "UPDATE user_totp SET secret_sealed = 'another' || secret_sealed, last_step = 0 WHERE user_id = ?", u.ID)
	require.NoError(t, err)
	require.NoError(t, hold.Commit())

	r = <-answered
	assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), "started again")
	var on bool
	require.NoError(t, a.DB.QueryRow("SELECT enabled_at IS NOT NULL FROM user_totp WHERE user_id = ?", u.ID).Scan(&on))
	assert.False(t, on, "TOTP stays off")
}
