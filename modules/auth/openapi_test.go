package auth_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestAuthOperationsDocumentWhatTheyAnswer provokes each answer of the password operations and
// checks the OpenAPI document lists that status for the operation (login's 401 was missing).
func TestAuthOperationsDocumentWhatTheyAnswer(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Login": "2-M", "RateLimit:ForgotPasswordPerIp": "1-H"}))
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct{} `json:"responses"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(r.Raw, &doc))
	documented := func(method, path string, got *apptest.Resp) {
		t.Helper()
		op, ok := doc.Paths[path][method]
		require.True(t, ok, "%s %s is in the document", method, path)
		assert.Contains(t, op.Responses, fmt.Sprint(got.Status), "%s %s answered %d, which its responses do not list: %s", method, path, got.Status, got.Raw)
	}
	u := a.Register(t)
	login := func(password string) *apptest.Resp {
		return a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": password})
	}
	for _, want := range []int{http.StatusOK, http.StatusUnauthorized, http.StatusTooManyRequests} {
		got := login(map[int]string{200: u.Password, 401: "not-the-password", 429: u.Password}[want])
		require.Equal(t, want, got.Status, string(got.Raw))
		documented("post", "/api/auth/login", got)
	}
	got := a.Post("/api/auth/login", "", map[string]any{"email": "Eve <" + u.Email + ">", "password": "x"})
	require.Equal(t, http.StatusBadRequest, got.Status)
	documented("post", "/api/auth/login", got)

	got = a.Post("/api/auth/reset-password", "", map[string]any{"token": "not-a-token", "newPassword": "a-brand-new-passphrase-77"})
	require.Equal(t, http.StatusBadRequest, got.Status)
	documented("post", "/api/auth/reset-password", got)

	for _, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		got = a.Post("/api/auth/forgot-password", "", map[string]any{"email": u.Email})
		require.Equal(t, want, got.Status, string(got.Raw))
		documented("post", "/api/auth/forgot-password", got)
	}

	got = a.Post("/api/auth/register", "", map[string]any{"fullName": "Again", "email": u.Email, "password": goodPassword})
	require.Equal(t, http.StatusConflict, got.Status)
	documented("post", "/api/auth/register", got)

	got = a.Get("/api/me", "")
	require.Equal(t, http.StatusUnauthorized, got.Status)
	documented("get", "/api/me", got)
}
