package auth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/auth/oauthtest"
	"provisioner/platform/testutil"
)

// TestOAuthReturnURLPaths: any path on an allowed origin was kept, %2F%2Fevil.example included,
// so a frontend router decoding it again sent the token's fragment to another host. A returnUrl is
// kept only if its decoded path is clean and starts with one of Frontend:ReturnPaths; else the
// sign-in lands on {Frontend:BaseUrl}/auth/callback. The provider denies every sign-in here: the
// refusal lands where a success would.
func TestOAuthReturnURLPaths(t *testing.T) {
	a, p := startOAuth(t, apptest.With(map[string]any{"Frontend:ReturnPaths": []string{"/app", "/dashboard/"}}))
	p.google.Deny = true
	landing := func(returnURL string) string {
		end := signIn(t, a, browser(t, p), "google", "?returnUrl="+url.QueryEscape(returnURL))
		require.Equal(t, "access_denied", fragment(end).Get("error"), end.String())
		end.Fragment = ""
		return end.String()
	}
	fallback := frontend + "/auth/callback"
	for _, kept := range []string{frontend + "/app", frontend + "/app/settings?tab=1", frontend + "/dashboard/x",
		"https://app.example.com/app/a%20b"} {
		assert.Equal(t, kept, landing(kept), "kept")
	}
	for _, refused := range []string{
		frontend + "/%2F%2Fevil.example", frontend + "/app/%2F%2Fevil.example", frontend + "/app/%2fx",
		frontend + "/app/%5Cevil.example", frontend + "/app\\evil", frontend + "//evil.example/app",
		frontend + "/app//evil.example", frontend + "/app/../admin", frontend + "/app/./x", frontend + "/app/%2e%2e/admin",
		frontend + "/app/%252F%252Fevil.example", frontend + "/application", frontend + "/dashboard", frontend + "/",
		frontend, "https://evil.test/app",
	} {
		assert.Equal(t, fallback, landing(refused), "refused: %s", refused)
	}
}

// TestOAuthFlowCookieIsHostPrefixedOverHTTPS: with Server:PublicUrl https the flow cookie is
// __Host-oauth_flow (Secure, Path=/, no Domain), so a sibling host of the zone cannot plant one;
// the callback reads only that one (an oauth_flow cookie is ignored).
func TestOAuthFlowCookieIsHostPrefixedOverHTTPS(t *testing.T) {
	a, p := startOAuth(t)
	p.github.SetUser(oauthtest.User{ID: oauthID(), Login: "h", Email: "host-" + testutil.RandomSuffix() + "@example.test", EmailVerified: true})
	a.Cfg.Server.PublicUrl = "https://api.example.test"
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	// begin runs the flow up to the provider's redirect back: the flow cookie set and the
	// callback's URL on this server.
	begin := func() (*http.Cookie, string) {
		res, err := noFollow.Get(a.URL + "/api/auth/login/github")
		require.NoError(t, err)
		res.Body.Close()
		cookies := res.Cookies()
		require.Len(t, cookies, 1)
		res, err = noFollow.Get(res.Header.Get("Location"))
		require.NoError(t, err)
		res.Body.Close()
		cb, err := url.Parse(res.Header.Get("Location"))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(cb.String(), "https://api.example.test/api/auth/callback/github"), cb.String())
		return cookies[0], a.URL + cb.RequestURI()
	}
	callback := func(to string, c *http.Cookie) url.Values {
		req, _ := http.NewRequest(http.MethodGet, to, nil)
		req.AddCookie(c)
		res, err := noFollow.Do(req)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusFound, res.StatusCode)
		loc, _ := url.Parse(res.Header.Get("Location"))
		return fragment(loc)
	}

	c, to := begin()
	assert.Equal(t, "__Host-oauth_flow", c.Name)
	assert.True(t, c.Secure)
	assert.Equal(t, "/", c.Path)
	assert.Empty(t, c.Domain)
	assert.True(t, c.HttpOnly)
	// The same value under the unprefixed name (what a sibling host could set) is not read.
	assert.Equal(t, "invalid_state", callback(to, &http.Cookie{Name: "oauth_flow", Value: c.Value}).Get("error"))

	c, to = begin()
	assert.NotEmpty(t, callback(to, c).Get("access_token"), "the __Host- cookie signs in")
}
