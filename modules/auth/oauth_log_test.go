package auth_test

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/auth/oauthtest"
	"provisioner/platform/testutil"
)

// Google's profile is fetched with the access token in the URL's query (goth's provider): when
// that request failed in the network (a reset connection, a timeout), the error logged named the
// URL, and so wrote the user's Google access token into the service's log. The log now names the
// endpoint without its query.
func TestOAuthProviderFailureLogsNoAccessToken(t *testing.T) {
	logs := &logBuffer{}
	a, p := startOAuth(t, apptest.WithFx(fx.Decorate(func(*slog.Logger) *slog.Logger {
		return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})))
	for _, provider := range []*oauthtest.Provider{p.google, p.github} {
		id := oauthID()
		provider.SetUser(oauthtest.User{ID: id, Login: "hang", Email: "hang-" + testutil.RandomSuffix() + "@example.test", EmailVerified: true})
		provider.SetHangUp(true)
		end := signIn(t, a, browser(t, p), provider.Kind, "")
		provider.SetHangUp(false)
		assert.Equal(t, "provider_error", fragment(end).Get("error"), "%s: %s", provider.Kind, end)
		out := logs.String()
		assert.Contains(t, out, "oauth user fetch failed", provider.Kind)
		if provider == p.google {
			assert.Contains(t, out, `userinfo\": EOF`, "the failed call is still named, without its query")
		}
		assert.NotContains(t, out, "at-"+id, "%s: the access token the fake handed out is not in the log", provider.Kind)
	}
}
