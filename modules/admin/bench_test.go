package admin_test

import (
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"provisioner/app/apptest"
)

// BenchmarkAdminAtScale seeds 100,000 users and 100,000 databases, then times an admin list page
// (with and without a search), and a user's dashboard; it reports the p99 of each (target: under
// 20 ms).
func BenchmarkAdminAtScale(b *testing.B) {
	a := apptest.Start(b, apptest.With(map[string]any{"RateLimit:PerUser": "100000000-M", "RateLimit:PerIp": "100000000-M"}))
	var users int
	if err := a.DB.QueryRow("SELECT count(*) FROM users").Scan(&users); err != nil {
		b.Fatal(err)
	}
	if users < 100_000 {
		for _, q := range []string{
			`INSERT INTO users (email, full_name, organization, role, security_stamp)
			 SELECT 'seed' || g || '@scale.test', 'Seed User ' || g, 'Org ' || (g % 500), 'User', 1
			 FROM generate_series(1, 100000) g ON CONFLICT DO NOTHING`,
			`INSERT INTO database_instances (user_id, name, engine, database_name, database_user, password_sealed, status, max_space_bytes)
			 SELECT u.id, 'seed', 'postgres', 'seed_' || u.id, 'seed_' || u.id, 'v1.x.y', 'Active', 536870912
			 FROM users u WHERE u.email LIKE 'seed%@scale.test'`,
			`ANALYZE users`, `ANALYZE database_instances`,
		} {
			if _, err := a.DB.Exec(q); err != nil {
				b.Fatal(err)
			}
		}
	}
	admin := a.AdminToken(b)
	var someone int64
	if err := a.DB.QueryRow("SELECT id FROM users WHERE email = 'seed77777@scale.test'").Scan(&someone); err != nil {
		b.Fatal(err)
	}
	paths := map[string]string{
		"list":      "/api/users?page=50&pageSize=100",
		"search":    "/api/users?search=seed%20User%207777&pageSize=20",
		"dbs":       "/api/database-instances?page=10&pageSize=100",
		"dashboard": fmt.Sprintf("/api/users/%d/dashboard", someone),
	}
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for name, p := range paths {
			start := time.Now()
			r := a.Get(p, admin)
			times[name] = append(times[name], time.Since(start))
			if r.Status != http.StatusOK {
				b.Fatalf("%s: %d %s", p, r.Status, r.Raw)
			}
		}
	}
	b.StopTimer()
	for name, d := range times {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		b.ReportMetric(float64(d[int(float64(len(d)-1)*0.99)].Microseconds())/1000, name+"-p99-ms")
	}
}
