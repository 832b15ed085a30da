package databases_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

// TestMain gives the package a fresh control database and removes, afterwards, the MariaDB
// databases and users its tests created (the machine's MariaDB outlives the run; the PostgreSQL
// tenant cluster is scripts/test.sh's own and goes away with it).
func TestMain(m *testing.M) {
	before := mysqlTenants()
	code := testutil.Run(m)
	if pool, err := sql.Open("mysql", testutil.TenantMysqlDSN()); err == nil {
		for n := range mysqlTenants() {
			if !before[n] {
				_, _ = pool.Exec("DROP DATABASE IF EXISTS `" + n + "`")
				_, _ = pool.Exec("DROP USER IF EXISTS '" + n + "'@'%'")
			}
		}
		pool.Close()
	}
	os.Exit(code)
}

// mysqlTenants lists the tenant database and user names on the MariaDB server.
func mysqlTenants() map[string]bool {
	out := map[string]bool{}
	pool, err := sql.Open("mysql", testutil.TenantMysqlDSN())
	if err != nil {
		return out
	}
	defer pool.Close()
	rows, err := pool.Query("SELECT schema_name FROM information_schema.schemata WHERE schema_name REGEXP '^u[0-9]+_' " +
		"UNION SELECT user FROM mysql.user WHERE user REGEXP '^u[0-9]+_'")
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if rows.Scan(&n) == nil {
			out[n] = true
		}
	}
	return out
}

type item struct {
	ID             int64      `json:"databaseInstanceId"`
	Name           string     `json:"name"`
	Engine         string     `json:"engine"`
	Host           string     `json:"host"`
	Port           int        `json:"port"`
	DatabaseName   string     `json:"databaseName"`
	DatabaseUser   string     `json:"databaseUser"`
	Status         string     `json:"status"`
	UsedSpaceBytes int64      `json:"usedSpaceBytes"`
	MaxSpaceBytes  int64      `json:"maxSpaceBytes"`
	ReadOnly       bool       `json:"readOnly"`
	ReadOnlyReason string     `json:"readOnlyReason"`
	LastActivity   *time.Time `json:"lastActivity"`
	ErrorMessage   string     `json:"errorMessage"`
}

type reveal struct {
	DatabaseUser     string `json:"databaseUser"`
	Password         string `json:"password"`
	ConnectionString string `json:"connectionString"`
}

func engines(t *testing.T) map[string]any {
	return map[string]any{
		"ConnectionStrings:TenantPostgres": testutil.TenantPostgresURL(t),
		"ConnectionStrings:TenantMysql":    testutil.TenantMysqlDSN(),
		"RateLimit:PasswordReveal":         "1000-M",
		// Deletes drop at once unless a test opens a recovery window (recovery_test.go).
		"Databases:RecoveryHours": 0,
		// Tests refresh usage themselves (UsageRefresher.Refresh), which does nothing while a
		// background refresh holds the refresh's lock: no background refresh during a test.
		"Databases:UsageRefreshSeconds": 3600,
	}
}

func start(t *testing.T, extra map[string]any, opts ...apptest.Option) *apptest.App {
	kv := engines(t)
	for k, v := range extra {
		kv[k] = v
	}
	return apptest.Start(t, append([]apptest.Option{apptest.With(kv)}, opts...)...)
}

// connect opens a real client connection with a revealed credential and pings it.
func connect(t testing.TB, engine string, it item, user, password string) (*sql.DB, error) {
	t.Helper()
	var pool *sql.DB
	switch engine {
	case "postgres":
		conn, err := db.Connector(fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", user, password, it.Host, it.Port, it.DatabaseName))
		require.NoError(t, err)
		pool = sql.OpenDB(conn)
	case "mysql":
		cfg := mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, password, "tcp", fmt.Sprintf("%s:%d", it.Host, it.Port), it.DatabaseName
		cfg.Timeout = 10 * time.Second
		c, err := mysql.NewConnector(cfg)
		require.NoError(t, err)
		pool = sql.OpenDB(c)
	}
	pool.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	t.Cleanup(func() { pool.Close() })
	return pool, nil
}

func create(t *testing.T, a *apptest.App, token, engine string) item {
	t.Helper()
	r := a.Post("/api/me/databases", token, map[string]any{"engine": engine, "name": "app data"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var it item
	r.Decode(t, &it)
	return it
}

func revealPassword(t *testing.T, a *apptest.App, token string, id int64) reveal {
	t.Helper()
	r := a.Get(fmt.Sprintf("/api/me/databases/%d/password", id), token)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var rv reveal
	r.Decode(t, &rv)
	return rv
}

// ownedDatabase registers a user, creates them a database of engine, connects to it as its owner,
// and runs the setup statements there.
func ownedDatabase(t *testing.T, a *apptest.App, engine string, setup ...string) (item, reveal, *sql.DB) {
	t.Helper()
	u := a.Register(t)
	it := create(t, a, u.Token, engine)
	rv := revealPassword(t, a, u.Token, it.ID)
	owner, err := connect(t, engine, it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	for _, stmt := range setup {
		_, err = owner.Exec(stmt)
		require.NoError(t, err, stmt)
	}
	return it, rv, owner
}

func TestRegistrationProvisionsATenantDatabase(t *testing.T) {
	a := start(t, nil)
	r := a.Post("/api/auth/register", "", map[string]any{"fullName": "New Tenant", "email": "tenant-" + testutil.RandomSuffix() + "@example.test",
		"password": "a-tenant-passphrase-9"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var d struct {
		AccessToken    string `json:"accessToken"`
		TenantDatabase item   `json:"tenantDatabase"`
	}
	r.Decode(t, &d)
	assert.Equal(t, "Active", d.TenantDatabase.Status)
	assert.Equal(t, "postgres", d.TenantDatabase.Engine)
	list := a.Get("/api/me/databases", d.AccessToken)
	var items []item
	list.Decode(t, &items)
	require.Len(t, items, 1)
	assert.Equal(t, d.TenantDatabase.ID, items[0].ID)
	assert.NotContains(t, string(list.Raw), "password")
}

func TestEnginesCatalogue(t *testing.T) {
	a := start(t, nil)
	r := a.Get("/api/engines", "")
	require.Equal(t, http.StatusOK, r.Status)
	var list []struct {
		ID        string `json:"id"`
		Version   string `json:"version"`
		Available bool   `json:"available"`
		Default   bool   `json:"default"`
	}
	r.Decode(t, &list)
	require.Len(t, list, 2)
	for _, e := range list {
		assert.True(t, e.Available, e.ID)
		assert.NotEmpty(t, e.Version, e.ID)
	}
	assert.True(t, list[0].Default)

	down := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:TenantPostgres": "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable"}))
	r = down.Get("/api/engines", "")
	require.Equal(t, http.StatusOK, r.Status)
	r.Decode(t, &list)
	require.Len(t, list, 1)
	assert.False(t, list[0].Available)
}

// TestLifecycleOnEveryEngine is the shared suite every engine passes, with real connections.
func TestLifecycleOnEveryEngine(t *testing.T) {
	a := start(t, nil)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			alice, bob := a.Register(t), a.Register(t)
			it := create(t, a, alice.Token, engine)
			assert.Equal(t, "Active", it.Status)
			assert.Equal(t, engine, it.Engine)
			assert.Equal(t, "app data", it.Name)
			assert.True(t, databases.SafeName.MatchString(it.DatabaseName))

			rv := revealPassword(t, a, alice.Token, it.ID)
			assert.GreaterOrEqual(t, len(rv.Password), 22, "at least 128 bits")
			assert.Contains(t, rv.ConnectionString, it.DatabaseName)
			conn, err := connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err, "the revealed password connects")
			_, err = conn.Exec("CREATE TABLE notes (id int PRIMARY KEY, body text)")
			require.NoError(t, err, "and can create a table")

			_, err = connect(t, engine, it, rv.DatabaseUser, rv.Password+"x")
			assert.Error(t, err, "a wrong password cannot connect")

			// Bob's own role cannot connect to Alice's database.
			bobs := create(t, a, bob.Token, engine)
			bobRv := revealPassword(t, a, bob.Token, bobs.ID)
			_, err = connect(t, engine, it, bobRv.DatabaseUser, bobRv.Password)
			assert.Error(t, err, "another user's role cannot connect")
			// And Bob cannot reach Alice's database through the API.
			for _, req := range []apptest.Request{
				{Method: "GET", Path: fmt.Sprintf("/api/me/databases/%d/password", it.ID)},
				{Method: "POST", Path: fmt.Sprintf("/api/me/databases/%d/pause", it.ID)},
				{Method: "POST", Path: fmt.Sprintf("/api/me/databases/%d/resume", it.ID)},
				{Method: "DELETE", Path: fmt.Sprintf("/api/me/databases/%d", it.ID)},
			} {
				req.Token = bob.Token
				assert.Equal(t, http.StatusNotFound, a.Do(req).Status, req.Method+" "+req.Path)
			}

			// Pause: the role can no longer connect, and its open session is ended.
			r := a.Post(fmt.Sprintf("/api/me/databases/%d/pause", it.ID), alice.Token, nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			assert.Contains(t, string(r.Raw), `"status":"Paused"`)
			_, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			assert.Error(t, err, "a paused database refuses its owner")
			assert.Error(t, conn.Ping(), "the open session was ended")
			r = a.Post(fmt.Sprintf("/api/me/databases/%d/pause", it.ID), alice.Token, nil)
			assert.Equal(t, http.StatusConflict, r.Status)
			assert.Equal(t, "Database is Paused; only an Active database can be paused", r.Env.Message)

			r = a.Post(fmt.Sprintf("/api/me/databases/%d/resume", it.ID), alice.Token, nil)
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			_, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err, "resume lets the owner in again")
			r = a.Post(fmt.Sprintf("/api/me/databases/%d/resume", it.ID), alice.Token, nil)
			assert.Equal(t, http.StatusConflict, r.Status)
			assert.Equal(t, "Database is Active; only a Paused database can be resumed", r.Env.Message)

			// Delete: gone on the engine.
			r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/databases/%d", it.ID), Token: alice.Token})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			assert.False(t, existsOnEngine(t, engine, it.DatabaseName), "dropped on the engine")
			assert.Equal(t, http.StatusNotFound, a.Get(fmt.Sprintf("/api/me/databases/%d/password", it.ID), alice.Token).Status)
			var items []item
			a.Get("/api/me/databases", alice.Token).Decode(t, &items)
			for _, x := range items {
				assert.NotEqual(t, it.ID, x.ID, "deleted databases are not listed")
			}

			var n int
			require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'database.password.revealed' AND target_id = ? AND ip <> '' AND user_agent <> ''", fmt.Sprint(it.ID)).Scan(&n))
			assert.Equal(t, 1, n, "the reveal is audited with IP and user agent")
		})
	}
}

func existsOnEngine(t *testing.T, engine, name string) bool {
	t.Helper()
	var n int
	switch engine {
	case "postgres":
		conn, err := db.Connector(testutil.TenantPostgresURL(t))
		require.NoError(t, err)
		pool := sql.OpenDB(conn)
		defer pool.Close()
		require.NoError(t, pool.QueryRow("SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n))
		var roles int
		require.NoError(t, pool.QueryRow("SELECT count(*) FROM pg_roles WHERE rolname = $1", name).Scan(&roles))
		n += roles
	case "mysql":
		pool, err := sql.Open("mysql", testutil.TenantMysqlDSN())
		require.NoError(t, err)
		defer pool.Close()
		require.NoError(t, pool.QueryRow("SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n))
		var users int
		require.NoError(t, pool.QueryRow("SELECT count(*) FROM mysql.user WHERE user = ?", name).Scan(&users))
		n += users
	}
	return n > 0
}

func TestQuotaAndValidation(t *testing.T) {
	a := start(t, map[string]any{"Databases:MaxPerUser": 2})
	u := a.Register(t) // registration's database counts
	create(t, a, u.Token, "postgres")
	r := a.Post("/api/me/databases", u.Token, map[string]any{})
	assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))

	v := a.Register(t)
	for _, body := range []map[string]any{{"engine": "oracle"}, {"name": strings.Repeat("x", 64)}, {"name": "bad;name"}} {
		r := a.Post("/api/me/databases", v.Token, body)
		assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	}
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM database_instances WHERE user_id = ?", v.ID).Scan(&n))
	assert.Equal(t, 1, n, "bad input writes nothing")
}

func TestUsageAndReadOnlySwitch(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it := create(t, a, u.Token, engine)
			rv := revealPassword(t, a, u.Token, it.ID)
			conn, err := connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err)
			_, err = conn.Exec("CREATE TABLE payload (id int PRIMARY KEY, body text)")
			require.NoError(t, err)
			payload := strings.Repeat("x", 1000)
			for i := 0; i < 1500; i++ {
				_, err = conn.Exec(fmt.Sprintf("INSERT INTO payload VALUES (%d, '%s')", i, payload))
				require.NoError(t, err)
			}
			if engine == "mysql" {
				_, _ = conn.Exec("ANALYZE TABLE payload")
			}
			require.NoError(t, usage.Refresh(context.Background()))
			var got item
			a.Get(fmt.Sprintf("/api/database-instances/%d", it.ID), admin).Decode(t, &got)
			assert.Greater(t, got.UsedSpaceBytes, int64(1<<20), "the engine's size")
			require.NotNil(t, got.LastActivity, "a session was seen")
			assert.False(t, got.ReadOnly)

			r := a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/database-instances/%d", it.ID), Token: admin,
				Body: map[string]any{"maxSpaceBytes": 1 << 20}})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			require.NoError(t, usage.Refresh(context.Background()))
			var mine []item
			a.Get("/api/me/databases", u.Token).Decode(t, &mine)
			require.Len(t, mine, 2)
			for _, m := range mine {
				if m.ID == it.ID {
					assert.True(t, m.ReadOnly, "over quota: read-only")
				}
			}
			conn, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err, "reads still work")
			_, err = conn.Exec("INSERT INTO payload VALUES (99999, 'more')")
			assert.Error(t, err, "writes are refused")
			var count int
			require.NoError(t, conn.QueryRow("SELECT count(*) FROM payload").Scan(&count))
			assert.Equal(t, 1500, count)

			r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/database-instances/%d", it.ID), Token: admin,
				Body: map[string]any{"maxSpaceBytes": 1 << 30}})
			require.Equal(t, http.StatusOK, r.Status)
			require.NoError(t, usage.Refresh(context.Background()))
			conn, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			require.NoError(t, err)
			_, err = conn.Exec("INSERT INTO payload VALUES (99999, 'more')")
			assert.NoError(t, err, "back under 90%: writable again")

			var switches int
			require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action LIKE 'database.readonly.%' AND target_id = ?", fmt.Sprint(it.ID)).Scan(&switches))
			assert.Equal(t, 2, switches, "each switch is audited")
		})
	}
}

func TestAccessCredentials(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			it, _, _ := ownedDatabase(t, a, engine, "CREATE TABLE t (id int PRIMARY KEY)", "INSERT INTO t VALUES (1)")

			r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "readOnly": true})
			require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
			var cred struct {
				ID       int64  `json:"id"`
				Username string `json:"username"`
				Password string `json:"password"`
			}
			r.Decode(t, &cred)
			require.NotEmpty(t, cred.Password)
			ro, err := connect(t, engine, it, cred.Username, cred.Password)
			require.NoError(t, err)
			var n int
			require.NoError(t, ro.QueryRow("SELECT count(*) FROM t").Scan(&n))
			assert.Equal(t, 1, n)
			_, err = ro.Exec("INSERT INTO t VALUES (2)")
			assert.Error(t, err, "read-only credential cannot write")

			got := a.Get(fmt.Sprintf("/api/access-credentials/%d", cred.ID), admin)
			require.Equal(t, http.StatusOK, got.Status)
			assert.NotContains(t, string(got.Raw), cred.Password)
			list := a.Get(fmt.Sprintf("/api/access-credentials?databaseInstanceId=%d", it.ID), admin)
			assert.NotContains(t, string(list.Raw), cred.Password)

			r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/access-credentials/%d", cred.ID), Token: admin, Body: map[string]any{"rotatePassword": true}})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			var rotated struct{ Password string }
			r.Decode(t, &rotated)
			_, err = connect(t, engine, it, cred.Username, cred.Password)
			assert.Error(t, err, "the old password stops working")
			_, err = connect(t, engine, it, cred.Username, rotated.Password)
			assert.NoError(t, err)

			r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/access-credentials/%d", cred.ID), Token: admin})
			require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
			_, err = connect(t, engine, it, cred.Username, rotated.Password)
			assert.Error(t, err)
			assert.Equal(t, http.StatusNotFound, a.Get(fmt.Sprintf("/api/access-credentials/%d", cred.ID), admin).Status)
		})
	}
}

func TestPasswordRevealIsRateLimited(t *testing.T) {
	a := start(t, map[string]any{"RateLimit:PasswordReveal": "2-M"})
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	path := fmt.Sprintf("/api/me/databases/%d/password", it.ID)
	assert.Equal(t, http.StatusOK, a.Get(path, u.Token).Status)
	assert.Equal(t, http.StatusOK, a.Get(path, u.Token).Status)
	r := a.Get(path, u.Token)
	assert.Equal(t, http.StatusTooManyRequests, r.Status)
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	assert.NotContains(t, string(r.Raw), "password\":")
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'database.password.revealed' AND target_id = ?", fmt.Sprint(it.ID)).Scan(&n))
	assert.Equal(t, 2, n, "refused reveals are not revealed")
}

// TestClientFieldsNeverLand: a client-sent owner, status or quota is ignored (mass assignment).
func TestClientFieldsNeverLand(t *testing.T) {
	a := start(t, nil)
	u, other := a.Register(t), a.Register(t)
	r := a.Post("/api/me/databases", u.Token, map[string]any{"engine": "postgres", "userId": other.ID, "user_id": other.ID,
		"maxSpaceBytes": 1, "max_space_bytes": 1, "status": "Paused", "databaseName": "postgres", "databaseInstanceId": 1})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var it item
	r.Decode(t, &it)
	assert.Equal(t, "Active", it.Status)
	assert.EqualValues(t, 536870912, it.MaxSpaceBytes, "the quota comes from configuration")
	assert.NotEqual(t, "postgres", it.DatabaseName)
	var owner int64
	require.NoError(t, a.DB.QueryRow("SELECT user_id FROM database_instances WHERE id = ?", it.ID).Scan(&owner))
	assert.Equal(t, u.ID, owner)
}
