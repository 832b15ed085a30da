package databases_test

import (
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

// BenchmarkCrowdCreate has CROWD (default 300) users each create a database at the same moment
// (POST /api/me/databases), on PostgreSQL and on MariaDB, until every one is Active; then as many
// bare CREATE ROLE + CREATE DATABASE one after another on the same server. It reports the answers
// that were 5xx (target 0), the wall time until every database answered 201 is Active, the serial
// time, and their ratio ("x-serial-bare"; the target is ≤ 1.2), with the admin sessions the
// engine's pool opened per create of the crowd ("engine-logins/create"). Databases:MaxEngineWaits
// is at its maximum (16) and a request past it waits for a slot as long as it takes (SetEngineSlotWait): the
// product refuses one that found no slot within a second (503, Retry-After), a safeguard against a
// hung engine that a crowd of 300 on a 2-core machine would otherwise meet by design.
func BenchmarkCrowdCreate(b *testing.B) {
	n := 300
	if c, err := strconv.Atoi(os.Getenv("CROWD")); err == nil && c > 0 {
		n = c
	}
	for _, engine := range []string{"postgres", "mysql"} {
		b.Run(engine, func(b *testing.B) {
			b.Cleanup(databases.SetEngineSlotWait(10 * time.Minute))
			a, engines := crowdApp(b, 16)
			bare := barePool(b, engine)
			defer bare.Close()
			for i := 0; i < b.N; i++ {
				users := register(b, a, n)
				settle(b, bare, engine)
				logins := databases.EngineLogins(engines, engine)
				failed, wall := crowd(b, a, engine, users)
				logins = databases.EngineLogins(engines, engine) - logins
				settle(b, bare, engine)
				start := time.Now()
				names := make([]string, n)
				for j := range names {
					names[j] = fmt.Sprintf("crowd_%d_%s", j, testutil.RandomSuffix())
					for _, s := range bareCreate(engine, names[j]) {
						if _, err := bare.Exec(s); err != nil {
							b.Fatal(err)
						}
					}
				}
				serial := time.Since(start)
				for _, name := range names {
					for _, s := range bareDrop(engine, name) {
						_, _ = bare.Exec(s)
					}
				}
				b.ReportMetric(float64(failed), "5xx")
				b.ReportMetric(wall.Seconds(), "crowd-s")
				b.ReportMetric(serial.Seconds(), "serial-bare-s")
				b.ReportMetric(wall.Seconds()/serial.Seconds(), "x-serial-bare")
				b.ReportMetric(float64(logins)/float64(n), "engine-logins/create")
			}
		})
	}
}

// TestCrowdCreatesAllActive: 40 users each create a database at the same moment, on PostgreSQL
// and on MariaDB, with Databases:MaxEngineWaits 4 and the wait for a slot unbounded (as
// BenchmarkCrowdCreate runs 300): every create answers 201 and every database ends Active.
func TestCrowdCreatesAllActive(t *testing.T) {
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			t.Cleanup(databases.SetEngineSlotWait(10 * time.Minute))
			a, _ := crowdApp(t, 4)
			failed, _ := crowd(t, a, engine, register(t, a, 40))
			require.Zero(t, failed, "5xx answers")
		})
	}
}

// crowdApp starts the service with both engines and limits far above a crowd's; the crowd comes
// from one address, so Server:MaxConnectionsPerIp (256) is off. It returns the app's engines too.
func crowdApp(tb testing.TB, waits int) (*apptest.App, *databases.Engines) {
	var engines *databases.Engines
	a := apptest.Start(tb, apptest.With(map[string]any{"ConnectionStrings:TenantPostgres": testutil.TenantPostgresURL(tb),
		"ConnectionStrings:TenantMysql": testutil.TenantMysqlDSN(), "Databases:MaxEngineWaits": waits, "Server:MaxConnectionsPerIp": 0,
		"RateLimit:Register": "1000000-M", "RateLimit:PerUser": "1000000-M", "RateLimit:PerIp": "1000000-M"}),
		apptest.WithFx(fx.Populate(&engines)))
	return a, engines
}

// register registers n users, one after another.
func register(tb testing.TB, a *apptest.App, n int) []apptest.User {
	tb.Helper()
	users := make([]apptest.User, n)
	for j := range users {
		users[j] = a.Register(tb)
	}
	return users
}

// crowd has each of users create a database on engine at the same moment and waits until every
// database answered 201 is Active; it fails on an answer neither 201 nor 5xx, and returns the 5xx
// answers and the wall time from the creates to the last Active.
func crowd(tb testing.TB, a *apptest.App, engine string, users []apptest.User) (failed int, wall time.Duration) {
	tb.Helper()
	statuses := make([]int, len(users))
	var wg sync.WaitGroup
	start := time.Now()
	for j, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[j] = a.Post("/api/me/databases", u.Token, map[string]any{"name": "crowd", "engine": engine}).Status
		}()
	}
	wg.Wait()
	var ids []int64
	for j, s := range statuses {
		switch {
		case s == http.StatusCreated:
			ids = append(ids, users[j].ID)
		case s >= 500:
			failed++
		default:
			tb.Fatalf("user %d: %d", j, s)
		}
	}
	if len(ids) == 0 {
		return failed, time.Since(start)
	}
	// Every database Active (one still in the finisher's hands is driven there).
	for {
		var active int
		if err := a.DB.QueryRow(`SELECT count(*) FROM database_instances WHERE user_id IN (?) AND name = 'crowd' AND status = 'Active'`,
			bun.In(ids)).Scan(&active); err != nil {
			tb.Fatal(err)
		}
		if active == len(ids) {
			return failed, time.Since(start)
		}
		if time.Since(start) > 10*time.Minute {
			tb.Fatalf("%d of %d Active after 10 minutes", active, len(ids))
		}
		a.Settle(time.Second)
	}
}

func barePool(b *testing.B, engine string) *sql.DB {
	if engine == "mysql" {
		pool, err := sql.Open("mysql", testutil.TenantMysqlDSN())
		if err != nil {
			b.Fatal(err)
		}
		return pool
	}
	conn, err := db.Connector(testutil.TenantPostgresURL(b))
	if err != nil {
		b.Fatal(err)
	}
	return sql.OpenDB(conn)
}

// settle has PostgreSQL write out what earlier work left in its WAL and buffers (CHECKPOINT), so
// neither the crowd nor the serial creates pay for the other's: each CREATE DATABASE copies its
// template through the WAL, and a crowd's leaves checkpoints running after it.
func settle(b *testing.B, bare *sql.DB, engine string) {
	if engine != "postgres" {
		return
	}
	if _, err := bare.Exec("CHECKPOINT"); err != nil {
		b.Fatal(err)
	}
}

func bareCreate(engine, name string) []string {
	if engine == "mysql" {
		return []string{fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'bare-password-123'", name),
			fmt.Sprintf("CREATE DATABASE `%s`", name), fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", name, name)}
	}
	return []string{fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'bare-password-123'", name),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", name, name)}
}

func bareDrop(engine, name string) []string {
	if engine == "mysql" {
		return []string{fmt.Sprintf("DROP DATABASE `%s`", name), fmt.Sprintf("DROP USER '%s'@'%%'", name)}
	}
	return []string{fmt.Sprintf("DROP DATABASE %s WITH (FORCE)", name), fmt.Sprintf("DROP ROLE %s", name)}
}
