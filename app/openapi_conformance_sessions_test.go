package app_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// sessionsAndMFA exercises the sessions and the second factor: refresh, the session list, ending
// sessions, logout, and a user of its own through TOTP enrolment, an MFA sign-in, step-up and
// turning TOTP off. The sessions of email's account that existed before are left alone.
func sessionsAndMFA(t *testing.T, a *apptest.App, want func(int, apptest.Request) *apptest.Resp, email, password string) {
	t.Helper()
	post := func(status int, path, token string, body any) *apptest.Resp {
		t.Helper()
		return want(status, apptest.Request{Method: http.MethodPost, Path: path, Token: token, Body: body})
	}
	var tk struct {
		AccessToken  string `json:"accessToken"`
		RefreshToken string `json:"refreshToken"`
		SessionID    int64  `json:"sessionId"`
		MFAToken     string `json:"mfaToken"`
	}
	post(http.StatusOK, "/api/auth/login", "", map[string]any{"email": email, "password": password}).Decode(t, &tk)
	post(http.StatusOK, "/api/auth/refresh", "", map[string]any{"refreshToken": tk.RefreshToken}).Decode(t, &tk)
	post(http.StatusUnauthorized, "/api/auth/refresh", "", map[string]any{"refreshToken": "not-a-refresh-token"})
	want(http.StatusOK, apptest.Request{Method: http.MethodGet, Path: "/api/me/sessions", Token: tk.AccessToken})
	want(http.StatusNotFound, apptest.Request{Method: http.MethodDelete, Path: "/api/me/sessions/987654321", Token: tk.AccessToken})
	second := post(http.StatusOK, "/api/auth/login", "", map[string]any{"email": email, "password": password})
	var other struct {
		SessionID int64 `json:"sessionId"`
	}
	second.Decode(t, &other)
	want(http.StatusOK, apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/sessions/%d", other.SessionID), Token: tk.AccessToken})
	post(http.StatusOK, "/api/auth/logout", tk.AccessToken, nil)

	v := a.Register(t)
	post(http.StatusOK, "/api/auth/login", "", map[string]any{"email": v.Email, "password": v.Password})
	want(http.StatusOK, apptest.Request{Method: http.MethodDelete, Path: "/api/me/sessions", Token: v.Token})
	post(http.StatusConflict, "/api/me/mfa/totp/verify", v.Token, map[string]any{"code": "123456"})
	var e struct {
		Secret string `json:"secret"`
	}
	post(http.StatusCreated, "/api/me/mfa/totp", v.Token, nil).Decode(t, &e)
	now, err := totp.GenerateCode(e.Secret, time.Now())
	require.NoError(t, err)
	post(http.StatusBadRequest, "/api/me/mfa/totp/verify", v.Token, map[string]any{"code": "x"})
	var codes struct {
		RecoveryCodes []string `json:"recoveryCodes"`
	}
	post(http.StatusOK, "/api/me/mfa/totp/verify", v.Token, map[string]any{"code": now}).Decode(t, &codes)
	require.Len(t, codes.RecoveryCodes, 10)
	post(http.StatusConflict, "/api/me/mfa/totp", v.Token, nil)
	post(http.StatusOK, "/api/auth/login", "", map[string]any{"email": v.Email, "password": v.Password}).Decode(t, &tk)
	post(http.StatusUnauthorized, "/api/auth/mfa", "", map[string]any{"mfaToken": tk.MFAToken, "code": now})
	next, err := totp.GenerateCode(e.Secret, time.Now().Add(30*time.Second))
	require.NoError(t, err)
	post(http.StatusOK, "/api/auth/mfa", "", map[string]any{"mfaToken": tk.MFAToken, "code": next}).Decode(t, &tk)
	post(http.StatusBadRequest, "/api/me/mfa/step-up", tk.AccessToken, map[string]any{"code": "wrong-code"})
	post(http.StatusOK, "/api/me/mfa/step-up", tk.AccessToken, map[string]any{"code": codes.RecoveryCodes[0]})
	off := func(status int, code string) {
		t.Helper()
		want(status, apptest.Request{Method: http.MethodDelete, Path: "/api/me/mfa/totp", Token: tk.AccessToken, Body: map[string]any{"code": code}})
	}
	off(http.StatusBadRequest, "wrong-code")
	off(http.StatusOK, codes.RecoveryCodes[1])
	off(http.StatusConflict, codes.RecoveryCodes[2])
	post(http.StatusConflict, "/api/me/mfa/step-up", tk.AccessToken, map[string]any{"code": codes.RecoveryCodes[2]})
}
