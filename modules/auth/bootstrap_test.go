package auth_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// logBuffer is an io.Writer safe for the app's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestBootstrapAdminDeletedOrDemotedStaysSo: an Admin's demotion or deletion of the bootstrap
// account survives a restart (it is neither promoted again nor created again with the password
// from the configuration); the start says why in one WARN line. Once no Admin is left at all,
// the next start makes the bootstrap admin again. Each start is a replica starting on the same
// fresh control database (its own: this test deletes the package's bootstrap admin).
func TestBootstrapAdminDeletedOrDemotedStaysSo(t *testing.T) {
	url, drop, err := testutil.CreateDatabase("auth_bootstrap_kept")
	require.NoError(t, err)
	t.Cleanup(drop)
	start := func() (*apptest.App, *logBuffer) {
		logs := &logBuffer{}
		a := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:Control": url}),
			apptest.WithFx(fx.Decorate(func(*slog.Logger) *slog.Logger {
				return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
			})))
		return a, logs
	}
	login := func(a *apptest.App) int {
		return a.Post("/api/auth/login", "", map[string]any{"email": apptest.AdminEmail, "password": apptest.AdminPassword}).Status
	}
	liveBootstrap := func(a *apptest.App) (id int64, role string) {
		err := a.DB.QueryRowContext(context.Background(), "SELECT id, role FROM users WHERE email = ? AND deleted_at IS NULL",
			apptest.AdminEmail).Scan(&id, &role)
		if err != nil {
			return 0, ""
		}
		return id, role
	}

	a, logs := start()
	require.Contains(t, logs.String(), "bootstrap admin created")
	root := a.AdminToken(t)
	rootID, _ := liveBootstrap(a)
	require.NotZero(t, rootID)
	bobEmail := "bob-" + testutil.RandomSuffix() + "@corp.test"
	r := a.Post("/api/users", root, map[string]any{"fullName": "Bob", "email": bobEmail, "password": "long-enough-password-42", "role": "Admin"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var bob struct{ ID int64 }
	r.Decode(t, &bob)
	r = a.Post("/api/auth/login", "", map[string]any{"email": bobEmail, "password": "long-enough-password-42"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var tok struct {
		AccessToken string `json:"accessToken"`
	}
	r.Decode(t, &tok)

	// Demoted by bob: a restart leaves it a User.
	r = a.Do(apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", rootID), Token: tok.AccessToken, Body: map[string]any{"role": "User"}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	b, logs := start()
	id, role := liveBootstrap(b)
	assert.Equal(t, rootID, id)
	assert.Equal(t, "User", role, "the demotion survives the restart")
	assert.Equal(t, 1, strings.Count(logs.String(), "bootstrap admin skipped"), logs.String())
	assert.Contains(t, logs.String(), `"level":"WARN"`)
	assert.Contains(t, logs.String(), "(demoted)")

	// Deleted by bob: a restart does not create it again.
	r = b.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/users/%d", rootID), Token: tok.AccessToken})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	c, logs := start()
	id, _ = liveBootstrap(c)
	assert.Zero(t, id, "the deletion survives the restart")
	assert.Equal(t, http.StatusUnauthorized, login(c), "the configured password signs nobody in")
	assert.Equal(t, 1, strings.Count(logs.String(), "bootstrap admin skipped"), logs.String())
	assert.Contains(t, logs.String(), "the account was deleted")
	assert.NotContains(t, logs.String(), "bootstrap admin created")
	var created int
	require.NoError(t, c.DB.QueryRowContext(context.Background(),
		"SELECT count(*) FROM audit_events WHERE action = 'user.created' AND details->>'by' = 'bootstrap'").Scan(&created))
	assert.Equal(t, 1, created, "only the first install's")

	// Every Admin gone (bob removed behind the service's back): the next start makes one again.
	_, err = c.DB.ExecContext(context.Background(), "UPDATE users SET deleted_at = now(), security_stamp = security_stamp + 1 WHERE id = ?", bob.ID)
	require.NoError(t, err)
	d, logs := start()
	assert.Contains(t, logs.String(), "bootstrap admin created")
	id, role = liveBootstrap(d)
	assert.NotZero(t, id)
	assert.Equal(t, "Admin", role)
	assert.Equal(t, http.StatusOK, login(d))
}

// TestBootstrapAdminPromotesOrCreatesWhileAdminsExist: apart from an account an Admin deleted or
// demoted, the contract's rule holds on an install that has Admins: Bootstrap:AdminEmail naming a
// self-registered account promotes it, and naming a new address creates it.
func TestBootstrapAdminPromotesOrCreatesWhileAdminsExist(t *testing.T) {
	url, drop, err := testutil.CreateDatabase("auth_bootstrap_contract")
	require.NoError(t, err)
	t.Cleanup(drop)
	start := func(email, password string) *apptest.App {
		kv := map[string]any{"ConnectionStrings:Control": url}
		if email != "" {
			kv["Bootstrap:AdminEmail"], kv["Bootstrap:AdminPassword"] = email, password
		}
		return apptest.Start(t, apptest.With(kv))
	}
	role := func(a *apptest.App, email string) string {
		var r string
		_ = a.DB.QueryRowContext(context.Background(), "SELECT role FROM users WHERE email = ? AND deleted_at IS NULL", email).Scan(&r)
		return r
	}
	a := start("", "")
	carol := a.Register(t)
	require.Equal(t, "User", role(a, carol.Email))

	b := start(carol.Email, "")
	assert.Equal(t, "Admin", role(b, carol.Email), "a self-registered account named by Bootstrap:AdminEmail is promoted")
	assert.Equal(t, http.StatusOK, b.Post("/api/auth/login", "", map[string]any{"email": carol.Email, "password": carol.Password}).Status,
		"its password is left alone")

	dave := "dave-" + testutil.RandomSuffix() + "@corp.test"
	c := start(dave, "dave-bootstrap-passphrase-9")
	assert.Equal(t, "Admin", role(c, dave), "a new address is created")
	assert.Equal(t, http.StatusOK, c.Post("/api/auth/login", "", map[string]any{"email": dave, "password": "dave-bootstrap-passphrase-9"}).Status)
}
