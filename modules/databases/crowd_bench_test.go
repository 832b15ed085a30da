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

	"github.com/uptrace/bun"

	"provisioner/app/apptest"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

// BenchmarkCrowdCreate has CROWD (default 300) users each create a database at the same moment
// (POST /api/me/databases), on PostgreSQL and on MariaDB, until every one is Active; then as many
// bare CREATE ROLE + CREATE DATABASE one after another on the same server. It reports the answers
// that were 5xx (target 0), the wall time until every database answered 201 is Active, the serial
// time, and their ratio ("x-serial-bare"; the target is ≤ 1.2).
func BenchmarkCrowdCreate(b *testing.B) {
	crowd := 300
	if n, err := strconv.Atoi(os.Getenv("CROWD")); err == nil && n > 0 {
		crowd = n
	}
	for _, engine := range []string{"postgres", "mysql"} {
		b.Run(engine, func(b *testing.B) {
			a := apptest.Start(b, apptest.With(map[string]any{"ConnectionStrings:TenantPostgres": testutil.TenantPostgresURL(b),
				"ConnectionStrings:TenantMysql": testutil.TenantMysqlDSN(),
				"RateLimit:Register":            "1000000-M", "RateLimit:PerUser": "1000000-M", "RateLimit:PerIp": "1000000-M"}))
			bare := barePool(b, engine)
			defer bare.Close()
			for i := 0; i < b.N; i++ {
				users := make([]apptest.User, crowd)
				for j := range users {
					users[j] = a.Register(b)
				}
				statuses := make([]int, crowd)
				var wg sync.WaitGroup
				start := time.Now()
				for j, u := range users {
					wg.Add(1)
					go func() {
						defer wg.Done()
						r := a.Post("/api/me/databases", u.Token, map[string]any{"name": "crowd", "engine": engine})
						statuses[j] = r.Status
					}()
				}
				wg.Wait()
				var ids []int64
				failed := 0
				for j, s := range statuses {
					switch {
					case s == http.StatusCreated:
						ids = append(ids, users[j].ID)
					case s >= 500:
						failed++
					default:
						b.Fatalf("user %d: %d", j, s)
					}
				}
				// Every database Active (one still in the finisher's hands is driven there).
				for {
					var active int
					if err := a.DB.QueryRow(`SELECT count(*) FROM database_instances WHERE user_id IN (?) AND name = 'crowd' AND status = 'Active'`,
						bun.In(ids)).Scan(&active); err != nil {
						b.Fatal(err)
					}
					if active == len(ids) {
						break
					}
					if time.Since(start) > 10*time.Minute {
						b.Fatalf("%d of %d Active after 10 minutes", active, len(ids))
					}
					a.Settle(time.Second)
				}
				wall := time.Since(start)

				start = time.Now()
				names := make([]string, crowd)
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
			}
		})
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
