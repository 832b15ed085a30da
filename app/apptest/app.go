// Package apptest starts the whole service for a test, on the package's fresh control database.
package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"provisioner/app"
	"provisioner/platform/coherent"
	"provisioner/platform/config"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
	. "provisioner/platform/testutil"
)

// Test secrets: fixed so sealed values survive between apps of one test; never used outside tests.
const (
	TestJwtKey        = "test-jwt-key-0123456789-abcdefghijklmnopqrstuvwxyz"
	TestEncryptionKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // base64 of 32 bytes
	AdminEmail        = "admin@provisioner.test"
	AdminPassword     = "admin-password-for-tests-1"
)

// App is a running service for one test.
type App struct {
	T        testing.TB
	URL      string
	Cfg      *config.Config
	DB       *bun.DB
	Finisher *provision.Finisher
	Redis    *redis.Client
	// Bus is the app's change feed; Do syncs it first, so rows a test wrote directly are seen.
	Bus    *coherent.Bus
	Client *http.Client
	app    *fxtest.App
	stop   sync.Once
}

// Option changes how Start builds the app.
type Option func(*options)

type options struct {
	overrides map[string]any
	extra     []fx.Option
	finisher  bool
}

// With sets configuration keys (":"-separated, case-insensitive) over the test defaults.
func With(kv map[string]any) Option {
	return func(o *options) {
		for k, v := range kv {
			o.overrides[k] = v
		}
	}
}

// WithFx adds fx options (fx.Decorate, fx.Populate, fx.Invoke…).
func WithFx(opts ...fx.Option) Option { return func(o *options) { o.extra = append(o.extra, opts...) } }

// WithFeedLag makes this app apply the control database's change feed d late: a replica whose
// listener falls behind (the answer to a write must still imply its effect here).
func WithFeedLag(d time.Duration) Option {
	return WithFx(fx.Decorate(func(db *bun.DB) *coherent.Bus { return coherent.New(db, coherent.Options{Lag: d}) }))
}

// WithFinisher runs the background finisher loop (off by default: tests call RunOnce).
func WithFinisher() Option { return func(o *options) { o.finisher = true } }

// TestConfig is a Development configuration on the package database, the real Redis (with a
// key prefix of its own), port 0 and the test secrets.
func TestConfig(t testing.TB, opts ...Option) *config.Config {
	t.Helper()
	o := options{overrides: map[string]any{}}
	for _, f := range opts {
		f(&o)
	}
	return buildConfig(t, &o)
}

func buildConfig(t testing.TB, o *options) *config.Config {
	base := map[string]any{
		"Environment":                   "Development",
		"Server:Port":                   0,
		"ConnectionStrings:Control":     PackageDatabase(t),
		"Redis:Url":                     RedisURL(),
		"Redis:KeyPrefix":               "t" + RandomSuffix(),
		"Jwt:Key":                       TestJwtKey,
		"Secrets:EncryptionKey":         TestEncryptionKey,
		"Bootstrap:AdminEmail":          AdminEmail,
		"Bootstrap:AdminPassword":       AdminPassword,
		"Finisher:Disabled":             !o.finisher,
		"Finisher:IntervalMillis":       100,
		"Log:Level":                     Env("TEST_LOG_LEVEL", "error"),
		"ConnectionStrings:TenantMysql": "",
		// Tests drive many changes a minute as one user; the test of the limit sets its own.
		"RateLimit:Provision": "10000-M",
		// Tenant engines are off unless a test turns them on (the databases module's tests do).
		"ConnectionStrings:TenantPostgres": "",
		// The SMTP fake (testutil.StartSMTP) speaks clear text unless a test offers TLS.
		"Smtp:Security": "none",
	}
	for k, v := range o.overrides {
		base[k] = v
	}
	cfg, err := app.LoadConfig(config.Source{File: "/dev/null", Env: []string{}, Overrides: base})
	require.NoError(t, err, "test configuration")
	return cfg
}

// Start builds and starts the whole service on a free port; it stops when the test ends.
func Start(t testing.TB, opts ...Option) *App {
	t.Helper()
	o := options{overrides: map[string]any{}}
	for _, f := range opts {
		f(&o)
	}
	cfg := buildConfig(t, &o)
	a := &App{T: t, Cfg: cfg, Client: &http.Client{Timeout: 60 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	extra := append([]fx.Option{fx.Populate(&a.DB, &a.Finisher, &a.Redis, &a.Bus)}, o.extra...)
	a.app = fxtest.New(t, app.Options(cfg, withServerAddr(&a.URL), fx.Options(extra...))...)
	a.app.RequireStart()
	t.Cleanup(a.Stop)
	return a
}

// Stop stops the service as a SIGTERM does (the server waits for the requests in flight, then
// every other part stops); the end of the test stops it if this was not called.
func (a *App) Stop() { a.stop.Do(a.app.RequireStop) }

// withServerAddr fills url once the server listens.
func withServerAddr(url *string) fx.Option {
	return fx.Invoke(func(lc fx.Lifecycle, s *httpx.Server) {
		lc.Append(fx.StartHook(func() {
			_, port, _ := net.SplitHostPort(s.Addr())
			*url = "http://127.0.0.1:" + port
		}))
	})
}

// Resp is a decoded response.
type Resp struct {
	Status int
	Header http.Header
	Raw    []byte
	// Env is the envelope; Data stays raw for Decode.
	Env struct {
		Success bool            `json:"success"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
		Errors  []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"errors"`
	}
}

// Decode unmarshals the envelope's data into v.
func (r *Resp) Decode(t testing.TB, v any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(r.Env.Data, v), "decode data of %s", string(r.Raw))
}

// Fields lists the fields named in a validation error.
func (r *Resp) Fields() []string {
	var out []string
	for _, e := range r.Env.Errors {
		out = append(out, e.Field)
	}
	return out
}

// Request is one HTTP call; Body is marshalled as JSON unless it is a string or []byte.
type Request struct {
	Method, Path string
	Body         any
	Token        string
	Header       map[string]string
	// SkipSync sends at once, without first waiting for every replica to apply what was
	// committed: what the answer shows is then only what the service itself made visible (the
	// checks that a write's answer implies its effect on every replica use it).
	SkipSync bool
}

// Do sends r and decodes the envelope (non-JSON bodies leave Env empty). It first waits until
// every replica has applied what was committed so far (rows the test wrote without the API, the
// finisher's work), as a client of the API always may.
func (a *App) Do(r Request) *Resp {
	a.T.Helper()
	if !r.SkipSync && a.Bus.Fresh() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = a.Bus.Sync(ctx)
		cancel()
	}
	var body io.Reader
	switch b := r.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		require.NoError(a.T, err)
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(r.Method, a.URL+r.Path, body)
	require.NoError(a.T, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	for k, v := range r.Header {
		req.Header.Set(k, v)
	}
	res, err := a.Client.Do(req)
	require.NoError(a.T, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(a.T, err)
	out := &Resp{Status: res.StatusCode, Header: res.Header, Raw: raw}
	if strings.Contains(res.Header.Get("Content-Type"), "json") && len(raw) > 0 {
		_ = json.Unmarshal(raw, &out.Env)
	}
	return out
}

// Get is Do for a GET.
func (a *App) Get(path, token string) *Resp {
	a.T.Helper()
	return a.Do(Request{Method: http.MethodGet, Path: path, Token: token})
}

// Post is Do for a POST with a JSON body.
func (a *App) Post(path, token string, body any) *Resp {
	a.T.Helper()
	return a.Do(Request{Method: http.MethodPost, Path: path, Token: token, Body: body})
}

// User is a registered test account.
type User struct {
	ID       int64
	Email    string
	Password string
	Token    string
}

// Register creates a fresh account through the API and returns it signed in.
func (a *App) Register(t testing.TB) User {
	t.Helper()
	u := User{Email: fmt.Sprintf("user-%s@example.test", RandomSuffix()), Password: "Tr0ub4dor&3-" + RandomSuffix()}
	r := a.Post("/api/auth/register", "", map[string]any{
		"fullName": "Test User", "organization": "Tests", "email": u.Email, "password": u.Password,
	})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var data struct {
		AccessToken string `json:"accessToken"`
		UserID      int64  `json:"userId"`
	}
	r.Decode(t, &data)
	u.ID, u.Token = data.UserID, data.AccessToken
	return u
}

// AdminToken signs in as the bootstrap admin.
func (a *App) AdminToken(t testing.TB) string {
	t.Helper()
	r := a.Post("/api/auth/login", "", map[string]any{"email": AdminEmail, "password": AdminPassword})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var data struct {
		AccessToken string `json:"accessToken"`
	}
	r.Decode(t, &data)
	return data.AccessToken
}

// AdminTokenOrEmpty signs in as the bootstrap admin, or returns "" when that fails (outages).
func (a *App) AdminTokenOrEmpty() string {
	r := a.Post("/api/auth/login", "", map[string]any{"email": AdminEmail, "password": AdminPassword})
	var data struct {
		AccessToken string `json:"accessToken"`
	}
	if r.Status == http.StatusOK {
		_ = json.Unmarshal(r.Env.Data, &data)
	}
	return data.AccessToken
}

// Settle runs the finisher until no due work is left (at most d).
func (a *App) Settle(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if a.Finisher.RunOnce(context.Background()) == 0 {
			return
		}
	}
}

// AwaitLockWaits waits until at least n sessions of the app's database wait on a lock while running
// a query holding substr ("" for any): requests a test parked behind a transaction it holds have
// reached it. finished (may be nil) reports a request that answered instead of waiting, as the
// message the test then fails with ("" while none has). The test fails after 10 s.
func (a *App) AwaitLockWaits(t testing.TB, n int, substr string, finished func() string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting int
		require.NoError(t, a.DB.QueryRowContext(context.Background(), "SELECT count(*) FROM pg_stat_activity "+
			"WHERE datname = current_database() AND wait_event_type = 'Lock' AND position(? in query) > 0", substr).Scan(&waiting))
		if waiting >= n {
			return
		}
		if finished != nil {
			if msg := finished(); msg != "" {
				t.Fatal(msg)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d session(s) waiting on a lock after 10 s, want %d", waiting, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
