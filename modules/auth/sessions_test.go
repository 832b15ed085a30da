package auth_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// tokens is what a sign-in, an MFA completion or a refresh answers.
type tokens struct {
	AccessToken      string    `json:"accessToken"`
	RefreshToken     string    `json:"refreshToken"`
	RefreshExpiresAt time.Time `json:"refreshExpiresAt"`
	SessionID        int64     `json:"sessionId"`
	UserID           int64     `json:"userId"`
	Provider         string    `json:"provider"`
	MFARequired      bool      `json:"mfaRequired"`
	MFAToken         string    `json:"mfaToken"`
}

func decodeTokens(t *testing.T, r *apptest.Resp) tokens {
	t.Helper()
	var v tokens
	r.Decode(t, &v)
	return v
}

// login signs in with a password and requires a 200.
func login(t *testing.T, a *apptest.App, email, password string) tokens {
	t.Helper()
	r := a.Post("/api/auth/login", "", map[string]any{"email": email, "password": password})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	return decodeTokens(t, r)
}

// register creates an account and answers its sign-in (the register answer's tokens).
func register(t *testing.T, a *apptest.App) (apptest.User, tokens) {
	t.Helper()
	u := apptest.User{Email: "s-" + testutil.RandomSuffix() + "@example.test", Password: goodPassword}
	r := a.Post("/api/auth/register", "", map[string]any{"fullName": "Session User", "email": u.Email, "password": u.Password})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	tk := decodeTokens(t, r)
	u.ID, u.Token = tk.UserID, tk.AccessToken
	return u, tk
}

func refresh(a *apptest.App, token string) *apptest.Resp {
	return a.Post("/api/auth/refresh", "", map[string]any{"refreshToken": token})
}

func TestRegisterAndLoginStartSessions(t *testing.T) {
	a := apptest.Start(t)
	u, reg := register(t, a)
	require.NotEmpty(t, reg.RefreshToken)
	assert.Positive(t, reg.SessionID)
	assert.WithinDuration(t, time.Now().Add(30*24*time.Hour), reg.RefreshExpiresAt, time.Minute, "Auth:RefreshDays 30")
	in := login(t, a, u.Email, u.Password)
	assert.NotEqual(t, reg.SessionID, in.SessionID, "every sign-in starts its own session")
	assert.False(t, in.MFARequired)

	var stored int
	require.NoError(t, a.DB.QueryRowContext(context.Background(),
		"SELECT count(*) FROM auth_refresh_tokens WHERE token_hash = sha256(convert_to(?, 'UTF8'))", in.RefreshToken).Scan(&stored))
	assert.Equal(t, 1, stored, "the refresh token is stored as its SHA-256")
	var plain int
	require.NoError(t, a.DB.QueryRowContext(context.Background(),
		"SELECT count(*) FROM auth_refresh_tokens WHERE position(convert_to(?, 'UTF8') in token_hash) > 0", in.RefreshToken).Scan(&plain))
	assert.Zero(t, plain, "never in plain text")
}

func TestRefreshRotatesAndAnswersTheSameSuccessorWithinTheReuseTime(t *testing.T) {
	a := apptest.Start(t)
	_, first := register(t, a)

	r := refresh(a, first.RefreshToken)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	second := decodeTokens(t, r)
	assert.NotEqual(t, first.RefreshToken, second.RefreshToken)
	assert.NotEqual(t, first.AccessToken, second.AccessToken)
	assert.Equal(t, first.SessionID, second.SessionID)
	assert.Equal(t, http.StatusOK, a.Get("/api/me", second.AccessToken).Status)

	r = refresh(a, first.RefreshToken)
	require.Equal(t, http.StatusOK, r.Status, "a spent token within Auth:RefreshReuseSeconds: %s", r.Raw)
	assert.Equal(t, second.RefreshToken, decodeTokens(t, r).RefreshToken, "the same successor")

	// Two tabs refreshing with one token at once both get the one successor.
	var wg sync.WaitGroup
	got := make([]*apptest.Resp, 6)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = refresh(a, second.RefreshToken) }()
	}
	wg.Wait()
	var successor string
	for _, r := range got {
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		tk := decodeTokens(t, r)
		if successor == "" {
			successor = tk.RefreshToken
		}
		assert.Equal(t, successor, tk.RefreshToken)
		assert.Equal(t, http.StatusOK, a.Get("/api/me", tk.AccessToken).Status)
	}
	// The token two rotations back, still within the reuse time, answers the session's current one.
	r = refresh(a, first.RefreshToken)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, successor, decodeTokens(t, r).RefreshToken)

	assert.Equal(t, http.StatusUnauthorized, refresh(a, "not-a-token").Status)
	assert.Equal(t, http.StatusBadRequest, refresh(a, "").Status)
}

func TestReusedRefreshTokenEndsTheSession(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"Auth:RefreshReuseSeconds": 0}))
	u, first := register(t, a)
	other := login(t, a, u.Email, u.Password)
	r := refresh(a, first.RefreshToken)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	second := decodeTokens(t, r)

	r = refresh(a, first.RefreshToken)
	assert.Equal(t, http.StatusUnauthorized, r.Status, "reuse past the reuse time")
	assert.Equal(t, http.StatusUnauthorized, refresh(a, second.RefreshToken).Status, "the whole session ended")
	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", second.AccessToken).Status)
	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", first.AccessToken).Status)
	assert.Equal(t, http.StatusOK, a.Get("/api/me", other.AccessToken).Status, "the user's other sessions live on")
	var n int
	require.NoError(t, a.DB.QueryRowContext(context.Background(), "SELECT count(*) FROM audit_events "+
		"WHERE action = 'user.session.refresh_reused' AND user_id = ? AND details->'sessionIds' @> to_jsonb(?::bigint)",
		u.ID, first.SessionID).Scan(&n))
	assert.Equal(t, 1, n)
}

func TestRefreshTokensDieWithTheAccountsChanges(t *testing.T) {
	smtp := testutil.StartSMTP(t)
	a := apptest.Start(t, apptest.With(map[string]any{"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port, "Frontend:BaseUrl": "http://app.test"}))
	admin := a.AdminToken(t)

	t.Run("role change", func(t *testing.T) {
		u, tk := register(t, a)
		r := a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin, Body: map[string]any{"role": "Admin"}})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		assert.Equal(t, http.StatusOK, a.Get("/api/users", tk.AccessToken).Status, "the access token carries the new role at once")
		assert.Equal(t, http.StatusUnauthorized, refresh(a, tk.RefreshToken).Status)
		assert.Equal(t, u.ID, login(t, a, u.Email, u.Password).UserID, "signing in again works")
	})
	t.Run("deletion", func(t *testing.T) {
		u, tk := register(t, a)
		r := a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		assert.Equal(t, http.StatusUnauthorized, refresh(a, tk.RefreshToken).Status)
	})
	t.Run("password reset", func(t *testing.T) {
		u, tk := register(t, a)
		require.Equal(t, http.StatusOK, a.Post("/api/auth/forgot-password", "", map[string]any{"email": u.Email}).Status)
		msg := smtp.WaitFor(t, u.Email, 10*time.Second)
		_, after, found := strings.Cut(msg, "http://app.test/auth/reset-password#token=")
		require.True(t, found, msg)
		r := a.Post("/api/auth/reset-password", "", map[string]any{"token": strings.Fields(after)[0], "newPassword": "a-brand-new-passphrase-77"})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		assert.Equal(t, http.StatusUnauthorized, refresh(a, tk.RefreshToken).Status)
		in := login(t, a, u.Email, "a-brand-new-passphrase-77")
		r = a.Get("/api/me/sessions", in.AccessToken)
		require.Equal(t, http.StatusOK, r.Status)
		var list []struct {
			ID int64 `json:"id"`
		}
		r.Decode(t, &list)
		assert.Len(t, list, 1, "the sessions from before the reset are not listed")
	})
}

type sessionItem struct {
	ID         int64      `json:"id"`
	Provider   string     `json:"provider"`
	IP         string     `json:"ip"`
	UserAgent  string     `json:"userAgent"`
	MFALevel   string     `json:"mfaLevel"`
	MFAAt      *time.Time `json:"mfaAt"`
	LastUsedAt time.Time  `json:"lastUsedAt"`
	Current    bool       `json:"current"`
}

func mySessions(t *testing.T, a *apptest.App, token string) []sessionItem {
	t.Helper()
	r := a.Get("/api/me/sessions", token)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var list []sessionItem
	r.Decode(t, &list)
	return list
}

// currentSession is the session of token, from its list.
func currentSession(t *testing.T, a *apptest.App, token string) sessionItem {
	t.Helper()
	for _, s := range mySessions(t, a, token) {
		if s.Current {
			return s
		}
	}
	require.Fail(t, "no current session")
	return sessionItem{}
}

func TestListAndEndMySessions(t *testing.T) {
	a := apptest.Start(t)
	u, one := register(t, a)
	two := login(t, a, u.Email, u.Password)
	r := a.Do(apptest.Request{Method: http.MethodPost, Path: "/api/auth/login", Header: map[string]string{"User-Agent": "TabThree/1.0"},
		Body: map[string]any{"email": u.Email, "password": u.Password}})
	require.Equal(t, http.StatusOK, r.Status)
	three := decodeTokens(t, r)

	list := mySessions(t, a, two.AccessToken)
	require.Len(t, list, 3)
	assert.Equal(t, three.SessionID, list[0].ID, "newest first")
	assert.Equal(t, "TabThree/1.0", list[0].UserAgent)
	assert.Equal(t, "127.0.0.1", list[0].IP)
	for _, s := range list {
		assert.Equal(t, s.ID == two.SessionID, s.Current, "session %d", s.ID)
		assert.Equal(t, "Password", s.Provider)
		assert.Equal(t, "aal1", s.MFALevel)
		assert.Nil(t, s.MFAAt)
	}

	other, otherTokens := register(t, a)
	_ = other
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/sessions/%d", otherTokens.SessionID), Token: two.AccessToken})
	assert.Equal(t, http.StatusNotFound, r.Status, "another user's session")
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: "/api/me/sessions/987654321", Token: two.AccessToken})
	assert.Equal(t, http.StatusNotFound, r.Status)

	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/sessions/%d", one.SessionID), Token: two.AccessToken})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", one.AccessToken).Status, "its access token stops at once")
	assert.Equal(t, http.StatusUnauthorized, refresh(a, one.RefreshToken).Status)
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/sessions/%d", one.SessionID), Token: two.AccessToken})
	assert.Equal(t, http.StatusNotFound, r.Status, "ended already")

	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: "/api/me/sessions", Token: two.AccessToken})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var ended struct {
		Ended int `json:"ended"`
	}
	r.Decode(t, &ended)
	assert.Equal(t, 1, ended.Ended)
	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", three.AccessToken).Status)
	assert.Equal(t, http.StatusOK, a.Get("/api/me", two.AccessToken).Status, "the current session stays")
	assert.Equal(t, http.StatusOK, a.Get("/api/me", otherTokens.AccessToken).Status, "another user's sessions stay")
	list = mySessions(t, a, two.AccessToken)
	require.Len(t, list, 1)
	assert.True(t, list[0].Current)

	require.Equal(t, http.StatusOK, a.Post("/api/auth/logout", two.AccessToken, nil).Status)
	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", two.AccessToken).Status)
	assert.Equal(t, http.StatusUnauthorized, refresh(a, two.RefreshToken).Status)
	assert.Equal(t, http.StatusUnauthorized, a.Post("/api/auth/logout", two.AccessToken, nil).Status)

	var n int
	require.NoError(t, a.DB.QueryRowContext(context.Background(),
		"SELECT count(*) FROM audit_events WHERE action = 'user.session.ended' AND user_id = ?", u.ID).Scan(&n))
	assert.Equal(t, 3, n, "one event per request that ended sessions")
}

func TestAdminListsAndEndsAUsersSessions(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	u, one := register(t, a)
	two := login(t, a, u.Email, u.Password)

	r := a.Get(fmt.Sprintf("/api/users/%d/sessions?pageSize=1", u.ID), admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var page struct {
		Items      []sessionItem `json:"items"`
		TotalCount int           `json:"totalCount"`
	}
	r.Decode(t, &page)
	assert.Equal(t, 2, page.TotalCount)
	require.Len(t, page.Items, 1)
	assert.Equal(t, two.SessionID, page.Items[0].ID)
	assert.False(t, page.Items[0].Current)

	assert.Equal(t, http.StatusForbidden, a.Get(fmt.Sprintf("/api/users/%d/sessions", u.ID), one.AccessToken).Status)
	assert.Equal(t, http.StatusNotFound, a.Get("/api/users/987654321/sessions", admin).Status)
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: "/api/users/987654321/sessions", Token: admin})
	assert.Equal(t, http.StatusNotFound, r.Status)

	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/users/%d/sessions", u.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var ended struct {
		Ended int `json:"ended"`
	}
	r.Decode(t, &ended)
	assert.Equal(t, 2, ended.Ended)
	for _, tk := range []tokens{one, two} {
		assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", tk.AccessToken).Status)
		assert.Equal(t, http.StatusUnauthorized, refresh(a, tk.RefreshToken).Status)
	}
	assert.Equal(t, http.StatusOK, a.Get("/api/users", admin).Status, "the admin's own session is another")
}

// TestLogoutReachesTheOtherReplicaWithTheAnswer: the session of a token is cached on every replica;
// a logout answered by one replica refuses the token on the other at the very next request (no
// waiting: SkipSync), though the other applies the change feed 150 ms late.
func TestLogoutReachesTheOtherReplicaWithTheAnswer(t *testing.T) {
	kv := map[string]any{"Redis:KeyPrefix": "sessions" + testutil.RandomSuffix()}
	one := apptest.Start(t, apptest.With(kv))
	two := apptest.Start(t, apptest.With(kv), apptest.WithFeedLag(150*time.Millisecond))
	u, first := register(t, one)
	second := login(t, two, u.Email, u.Password)
	third := login(t, one, u.Email, u.Password)
	onTwo := func(token string) int {
		return two.Do(apptest.Request{Method: http.MethodGet, Path: "/api/me", Token: token, SkipSync: true}).Status
	}
	settle := func() { // both replicas applied everything so far, and replica two caches the sessions
		require.NoError(t, two.Bus.Sync(context.Background()))
		for _, tk := range []tokens{first, second, third} {
			onTwo(tk.AccessToken)
		}
	}
	settle()
	require.Equal(t, http.StatusOK, onTwo(first.AccessToken))

	r := one.Do(apptest.Request{Method: http.MethodPost, Path: "/api/auth/logout", Token: first.AccessToken, SkipSync: true})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, http.StatusUnauthorized, onTwo(first.AccessToken), "logged out on replica one, refused on replica two")
	assert.Equal(t, http.StatusOK, onTwo(second.AccessToken), "the user's other sessions work")

	settle()
	r = one.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/sessions/%d", second.SessionID),
		Token: third.AccessToken, SkipSync: true})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, http.StatusUnauthorized, onTwo(second.AccessToken), "ended on replica one, refused on replica two")
	assert.Equal(t, http.StatusUnauthorized, two.Post("/api/auth/refresh", "", map[string]any{"refreshToken": second.RefreshToken}).Status)
	assert.Equal(t, http.StatusOK, onTwo(third.AccessToken))
}
