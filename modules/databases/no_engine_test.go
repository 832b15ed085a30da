package databases_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
)

// lockedBuffer is an io.Writer safe for the app's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// With no tenant engine configured there is no default engine (Databases:DefaultEngine names one
// that is not there), so a registration gives no first database and logs nothing about it (no
// "first resource not provisioned" WARN).
func TestNoEngineNoDefaultAndNoRegistrationWarning(t *testing.T) {
	logs := &lockedBuffer{}
	var engines *databases.Engines
	a := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:TenantPostgres": "", "ConnectionStrings:TenantMysql": "",
		"Databases:DefaultEngine": "postgres"}),
		apptest.WithFx(fx.Populate(&engines), fx.Decorate(func(*slog.Logger) *slog.Logger {
			return slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})))
	assert.Empty(t, engines.All())
	assert.Equal(t, "", engines.Default(), "no engine, no default")

	u := a.Register(t)
	assert.NotContains(t, logs.String(), "first resource not provisioned", "nothing to provision, nothing to warn about")
	r := a.Get("/api/me/databases", u.Token)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.JSONEq(t, `[]`, string(r.Env.Data))
}
