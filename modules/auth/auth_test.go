package auth_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

type authData struct {
	AccessToken    string          `json:"accessToken"`
	TokenType      string          `json:"tokenType"`
	ExpiresAt      time.Time       `json:"expiresAt"`
	Provider       string          `json:"provider"`
	Token          string          `json:"token"`
	UserID         int64           `json:"userId"`
	TenantDatabase json.RawMessage `json:"tenantDatabase"`
	User           struct {
		ID             int64  `json:"id"`
		Name           string `json:"name"`
		Email          string `json:"email"`
		Role           string `json:"role"`
		Provider       string `json:"provider"`
		ProviderUserID string `json:"providerUserId"`
	} `json:"user"`
}

func email() string { return fmt.Sprintf("Person-%s@Example.test", testutil.RandomSuffix()) }

const goodPassword = "violet-kettle-harbour-91"

func TestRegisterAnswersBothShapesAndIgnoresRole(t *testing.T) {
	a := apptest.Start(t)
	addr := email()
	r := a.Post("/api/auth/register", "", map[string]any{
		"fullName": "Grace Hopper", "organization": "Navy", "email": addr, "password": goodPassword,
		"role": "Admin", "id": 999999, "emailVerified": true,
	})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	assert.True(t, r.Env.Success)
	assert.Contains(t, strings.ToLower(r.Env.Message), "registered")
	var d authData
	r.Decode(t, &d)
	assert.NotEmpty(t, d.AccessToken)
	assert.Equal(t, d.AccessToken, d.Token)
	assert.Equal(t, "Bearer", d.TokenType)
	assert.Equal(t, "Password", d.Provider)
	assert.Equal(t, d.UserID, d.User.ID)
	assert.NotEqual(t, int64(999999), d.UserID, "a client-sent id never lands")
	assert.Equal(t, "User", d.User.Role, "a client-sent role never lands")
	assert.Equal(t, strings.ToLower(addr), d.User.Email)
	assert.Equal(t, "Grace Hopper", d.User.Name)
	assert.Empty(t, d.User.Provider)
	assert.Empty(t, d.User.ProviderUserID)
	assert.WithinDuration(t, time.Now().Add(time.Hour), d.ExpiresAt, time.Minute)
	assert.Contains(t, string(r.Raw), `"tenantDatabase"`)
	assert.NotContains(t, string(r.Raw), goodPassword)

	me := a.Get("/api/me", d.AccessToken)
	require.Equal(t, http.StatusOK, me.Status, string(me.Raw))
	var u struct {
		ID            int64  `json:"id"`
		Email         string `json:"email"`
		Role          string `json:"role"`
		EmailVerified *bool  `json:"emailVerified"`
	}
	me.Decode(t, &u)
	assert.Equal(t, d.UserID, u.ID)
	assert.Equal(t, "User", u.Role)
	require.NotNil(t, u.EmailVerified, string(me.Raw))
	assert.False(t, *u.EmailVerified, "a client-sent emailVerified never lands (a registration proves no address)")

	// Same email in another case: 409.
	r = a.Post("/api/auth/register", "", map[string]any{
		"fullName": "Other", "organization": "", "email": strings.ToUpper(addr), "password": goodPassword,
	})
	assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
}

func TestRegisterValidation(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Register": "1000-M"}))
	cases := []struct {
		name   string
		body   any
		fields []string
	}{
		{"missing everything", map[string]any{}, []string{"fullName", "email", "password"}},
		{"bad email", map[string]any{"fullName": "A", "email": "not-an-email", "password": goodPassword}, []string{"email"}},
		{"short password", map[string]any{"fullName": "A", "email": email(), "password": "short"}, []string{"password"}},
		{"long password", map[string]any{"fullName": "A", "email": email(), "password": strings.Repeat("x", 129)}, []string{"password"}},
		{"common password", map[string]any{"fullName": "A", "email": email(), "password": "password123"}, []string{"password"}},
		{"empty name", map[string]any{"fullName": "", "email": email(), "password": goodPassword}, []string{"fullName"}},
		{"blank name", map[string]any{"fullName": " \t ", "email": email(), "password": goodPassword}, []string{"fullName"}},
		{"blank name (Unicode spaces)", map[string]any{"fullName": "\u00a0\u2003", "email": email(), "password": goodPassword}, []string{"fullName"}},
		{"blank name and common password", map[string]any{"fullName": "  ", "email": email(), "password": "password123"}, []string{"fullName", "password"}},
		{"bidi override in name", map[string]any{"fullName": "\u202eevil", "email": email(), "password": goodPassword}, []string{"fullName"}},
		{"escape sequence in organization", map[string]any{"fullName": "A", "organization": "Acme\u001b[2J", "email": email(), "password": goodPassword}, []string{"organization"}},
		{"wrong types", map[string]any{"fullName": 5, "email": true, "password": goodPassword}, []string{"fullName", "email"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := a.Post("/api/auth/register", "", tc.body)
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.False(t, r.Env.Success)
			assert.ElementsMatch(t, tc.fields, r.Fields(), string(r.Raw))
		})
	}
	r := a.Do(apptest.Request{Method: "POST", Path: "/api/auth/register", Body: `{"fullName": "A", `})
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.False(t, r.Env.Success)
}

func TestLoginSameAnswerForUnknownEmailAndWrongPassword(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	ok := a.Post("/api/auth/login", "", map[string]any{"email": strings.ToUpper(u.Email), "password": u.Password})
	require.Equal(t, http.StatusOK, ok.Status, string(ok.Raw))
	var d authData
	ok.Decode(t, &d)
	assert.Equal(t, u.ID, d.UserID)
	assert.Empty(t, d.TenantDatabase, "login has no tenantDatabase")

	wrong := a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": "not-the-password"})
	unknown := a.Post("/api/auth/login", "", map[string]any{"email": "nobody-" + u.Email, "password": "not-the-password"})
	assert.Equal(t, http.StatusUnauthorized, wrong.Status)
	assert.Equal(t, http.StatusUnauthorized, unknown.Status)
	assert.Equal(t, wrong.Env, unknown.Env, "the bodies must not tell the cases apart")
}

func TestLoginRateLimitPerIPAndEmail(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Login": "3-M"}))
	u := a.Register(t)
	for i := 0; i < 3; i++ {
		r := a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": "wrong-password"})
		require.Equal(t, http.StatusUnauthorized, r.Status)
		assert.NotEmpty(t, r.Header.Get("X-RateLimit-Limit"))
	}
	r := a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password})
	require.Equal(t, http.StatusTooManyRequests, r.Status, string(r.Raw))
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	assert.Equal(t, "0", r.Header.Get("X-RateLimit-Remaining"))
	assert.False(t, r.Env.Success)
	// Another email from the same IP is a different key.
	other := a.Register(t)
	r = a.Post("/api/auth/login", "", map[string]any{"email": other.Email, "password": other.Password})
	assert.Equal(t, http.StatusOK, r.Status)
}

// TestLoginPerIpCountsEveryAttempt: the login limit was per IP and email only, so one address
// rotating emails could try a password on every account (spraying) and spend the hash capacity.
// RateLimit:LoginPerIp counts every attempt of an address, failed or successful, whatever the
// email: past it, a 429 with Retry-After, even for the right password.
func TestLoginPerIpCountsEveryAttempt(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:LoginPerIp": "3-M"}))
	u := a.Register(t)
	login := func(email, password string) *apptest.Resp {
		return a.Post("/api/auth/login", "", map[string]any{"email": email, "password": password})
	}
	require.Equal(t, http.StatusOK, login(u.Email, u.Password).Status)
	require.Equal(t, http.StatusUnauthorized, login(email(), "wrong-password").Status)
	require.Equal(t, http.StatusUnauthorized, login(email(), "wrong-password").Status)
	r := login(u.Email, u.Password)
	require.Equal(t, http.StatusTooManyRequests, r.Status, string(r.Raw))
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	assert.Equal(t, "3", r.Header.Get("X-RateLimit-Limit"))
	assert.Contains(t, r.Env.Message, "LoginPerIp")
	assert.Equal(t, http.StatusTooManyRequests, login(email(), "wrong-password").Status, "any email")
}

func TestRegisterAndForgotPasswordLimits(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Register": "2-M", "RateLimit:ForgotPassword": "2-H",
		"RateLimit:ForgotPasswordPerIp": "6-H", "Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port}))
	u := a.Register(t)
	a.Register(t)
	r := a.Post("/api/auth/register", "", map[string]any{"fullName": "A", "email": email(), "password": goodPassword})
	assert.Equal(t, http.StatusTooManyRequests, r.Status)

	// The per-email budget is silent: past it the answer is the same 200 and no mail goes out, so a
	// stranger who spends it neither locks the owner out of a 200 nor learns anything. Another
	// spelling of the same mailbox (fullwidth letters, an ideographic full stop: one address once
	// normalised) is the same key, not a fresh allowance of reset mails.
	local, domain, _ := strings.Cut(u.Email, "@")
	first := a.Post("/api/auth/forgot-password", "", map[string]any{"email": u.Email})
	require.Equal(t, http.StatusOK, first.Status)
	for _, spelling := range []string{u.Email, strings.ToUpper(local) + "@" + domain, local + "@" + widen(domain), local + "@" + strings.ReplaceAll(domain, ".", "。")} {
		r = a.Post("/api/auth/forgot-password", "", map[string]any{"email": spelling})
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", spelling, r.Raw)
		assert.Equal(t, first.Env, r.Env, spelling)
	}
	smtp.WaitForN(t, u.Email, 2, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, 2, smtp.CountTo(u.Email), "two mails within the email's budget, none past it")

	// The per-IP limit answers 429: the sixth request from this address is the last one this hour.
	require.Equal(t, http.StatusOK, a.Post("/api/auth/forgot-password", "", map[string]any{"email": email()}).Status)
	r = a.Post("/api/auth/forgot-password", "", map[string]any{"email": email()})
	assert.Equal(t, http.StatusTooManyRequests, r.Status, string(r.Raw))
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
}

// widen spells ASCII letters in their fullwidth forms (U+FF21…), which IDNA maps back.
func widen(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' {
			return r - 'a' + 'ａ'
		}
		return r
	}, s)
}

func TestPerIPAndPerUserLimits(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:PerUser": "3-M"}))
	u := a.Register(t)
	for i := 0; i < 3; i++ {
		require.Equal(t, http.StatusOK, a.Get("/api/me", u.Token).Status)
	}
	assert.Equal(t, http.StatusTooManyRequests, a.Get("/api/me", u.Token).Status)

	b := apptest.Start(t, apptest.With(map[string]any{"RateLimit:PerIp": "2-M"}))
	b.Get("/api/metrics/platform", "")
	b.Get("/api/engines", "")
	r := b.Get("/api/nowhere", "")
	assert.Equal(t, http.StatusTooManyRequests, r.Status)
	assert.Equal(t, "2", r.Header.Get("X-RateLimit-Limit"))
}

// tokenParts lets a test forge tokens.
func forge(t *testing.T, claims jwt.MapClaims, method jwt.SigningMethod, key any) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(t, err)
	return s
}

// forgeCrit signs claims with HS256 and key, with a crit header naming extensions.
func forgeCrit(t *testing.T, claims jwt.MapClaims, key []byte, crit ...string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	tok.Header["crit"] = crit
	s, err := tok.SignedString(key)
	require.NoError(t, err)
	return s
}

func TestTokenTampering(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	other := a.Register(t)
	now := time.Now()
	sid := func(token string) int64 { // the session of a token the service issued
		payload, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
		require.NoError(t, err)
		var c struct {
			Sid int64 `json:"sid"`
		}
		require.NoError(t, json.Unmarshal(payload, &c))
		require.Positive(t, c.Sid)
		return c.Sid
	}
	valid := jwt.MapClaims{"sub": fmt.Sprint(u.ID), "iss": "provisioner", "aud": "provisioner-clients",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "role": "Admin", "ver": 1, "sid": sid(u.Token)}
	with := func(k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for kk, vv := range valid {
			c[kk] = vv
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	key := []byte(apptest.TestJwtKey)
	parts := strings.Split(u.Token, ".")
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	require.Contains(t, string(header), "HS256")
	noneHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))

	cases := map[string]string{
		"missing":           "",
		"garbage":           "not.a.jwt",
		"alg none":          noneHeader + "." + parts[1] + ".",
		"another key":       forge(t, valid, jwt.SigningMethodHS256, []byte("another-key-another-key-another-key!")),
		"HS512":             forge(t, valid, jwt.SigningMethodHS512, key),
		"expired":           forge(t, with("exp", now.Add(-time.Hour).Unix()), jwt.SigningMethodHS256, key),
		"no exp":            forge(t, with("exp", nil), jwt.SigningMethodHS256, key),
		"wrong issuer":      forge(t, with("iss", "someone-else"), jwt.SigningMethodHS256, key),
		"wrong audience":    forge(t, with("aud", "other-clients"), jwt.SigningMethodHS256, key),
		"unknown user":      forge(t, with("sub", "987654321"), jwt.SigningMethodHS256, key),
		"no session":        forge(t, with("sid", nil), jwt.SigningMethodHS256, key),
		"unknown session":   forge(t, with("sid", 987654321), jwt.SigningMethodHS256, key),
		"another's session": forge(t, with("sid", sid(other.Token)), jwt.SigningMethodHS256, key),
		"tampered claims":   parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"1","role":"Admin"}`)) + "." + parts[2],
		// Signed with the right key, but asking (RFC 7515 §4.1.11) for extensions we do not
		// understand: a recipient must refuse it, even when crit names a registered claim.
		"crit exp": forgeCrit(t, valid, key, "exp"),
		"crit x":   forgeCrit(t, valid, key, "x"),
	}
	for name, tok := range cases {
		t.Run(name, func(t *testing.T) {
			r := a.Get("/api/me", tok)
			assert.Equal(t, http.StatusUnauthorized, r.Status, string(r.Raw))
			assert.False(t, r.Env.Success)
			assert.NotEmpty(t, r.Env.Message)
			if tok != "" && name != "garbage" && name != "alg none" {
				assert.Equal(t, "Invalid or expired token", r.Env.Message, "the same 401 as any invalid token")
			}
		})
	}
	// The forged-but-correct token works: the checks above are what refuse the others, and the
	// role claim is not trusted (the stored role is).
	r := a.Get("/api/me", forge(t, valid, jwt.SigningMethodHS256, key))
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"role":"User"`)
}

func TestPasswordResetThroughSMTP(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a := apptest.Start(t, apptest.With(map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port, "Frontend:BaseUrl": "http://app.test"}))
	u := a.Register(t)

	for _, addr := range []string{u.Email, "nobody-" + u.Email} {
		r := a.Post("/api/auth/forgot-password", "", map[string]any{"email": addr})
		require.Equal(t, http.StatusOK, r.Status)
		assert.Equal(t, "If an account exists for this email, a reset link has been sent.", r.Env.Message)
	}
	msg := smtp.WaitFor(t, u.Email, 10*time.Second)
	_, after, found := strings.Cut(msg, "http://app.test/auth/reset-password#token=")
	require.True(t, found, msg)
	token := strings.Fields(after)[0]
	assert.Zero(t, smtp.CountTo("nobody-"+u.Email), "no mail for an unknown account")

	r := a.Post("/api/auth/reset-password", "", map[string]any{"token": token, "newPassword": "password"})
	assert.Equal(t, http.StatusBadRequest, r.Status, "common passwords refused")

	newPassword := "a-brand-new-passphrase-77"
	r = a.Post("/api/auth/reset-password", "", map[string]any{"token": token, "newPassword": newPassword})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", u.Token).Status, "tokens issued before the reset are refused")
	r = a.Post("/api/auth/reset-password", "", map[string]any{"token": token, "newPassword": "yet-another-passphrase-8"})
	assert.Equal(t, http.StatusBadRequest, r.Status, "the token is single-use")
	assert.Equal(t, http.StatusUnauthorized, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password}).Status)
	assert.Equal(t, http.StatusOK, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": newPassword}).Status)

	var n int
	require.NoError(t, a.DB.QueryRowContext(context.Background(),
		"SELECT count(*) FROM audit_events WHERE action = 'user.password.reset' AND user_id = ?", u.ID).Scan(&n))
	assert.Equal(t, 1, n)
}

func TestBootstrapAdminAndAdminGuard(t *testing.T) {
	a := apptest.Start(t)
	tok := a.AdminToken(t)
	r := a.Get("/api/me", tok)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Contains(t, string(r.Raw), `"role":"Admin"`)
	// A second start keeps one admin and leaves its password alone.
	b := apptest.Start(t, apptest.With(map[string]any{"Bootstrap:AdminPassword": "a-different-password-123"}))
	assert.NotEmpty(t, b.AdminToken(t))
}

func TestAuditOfLogins(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": "wrong-password"})
	a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password})
	rows, err := a.DB.QueryContext(context.Background(),
		"SELECT action FROM audit_events WHERE user_id = ? ORDER BY id", u.ID)
	require.NoError(t, err)
	defer rows.Close()
	var actions []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		actions = append(actions, s)
	}
	assert.Equal(t, []string{"user.registered", "user.login.failed", "user.login"}, actions)
}

// A reset spends every outstanding link of the account: an older link (say one an attacker asked
// for and intercepted) must not set the password again after the owner reset it.
func TestPasswordResetSpendsEveryOutstandingToken(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a := apptest.Start(t, apptest.With(map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port, "Frontend:BaseUrl": "http://app.test"}))
	u := a.Register(t)
	other := a.Register(t)
	for _, addr := range []string{u.Email, u.Email, other.Email} {
		require.Equal(t, http.StatusOK, a.Post("/api/auth/forgot-password", "", map[string]any{"email": addr}).Status)
	}
	tokenOf := func(msg string) string {
		_, after, found := strings.Cut(msg, "http://app.test/auth/reset-password#token=")
		require.True(t, found, msg)
		return strings.Fields(after)[0]
	}
	msgs := smtp.WaitForN(t, u.Email, 2, 10*time.Second)
	first, second := tokenOf(msgs[0]), tokenOf(msgs[1])
	require.NotEqual(t, first, second)
	otherToken := tokenOf(smtp.WaitFor(t, other.Email, 10*time.Second))

	newPassword := "a-brand-new-passphrase-77"
	r := a.Post("/api/auth/reset-password", "", map[string]any{"token": second, "newPassword": newPassword})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))

	r = a.Post("/api/auth/reset-password", "", map[string]any{"token": first, "newPassword": "the-attackers-passphrase-1"})
	assert.Equal(t, http.StatusBadRequest, r.Status, "the older link died with the reset: %s", r.Raw)
	assert.Equal(t, []string{"token"}, r.Fields())
	assert.Equal(t, http.StatusUnauthorized, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": "the-attackers-passphrase-1"}).Status)
	assert.Equal(t, http.StatusOK, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": newPassword}).Status)

	// Another account's link is not touched.
	r = a.Post("/api/auth/reset-password", "", map[string]any{"token": otherToken, "newPassword": "others-new-passphrase-5"})
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
}
