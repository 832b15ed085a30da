package databases_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"provisioner/app/apptest"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

// BenchmarkCreateToUsable measures POST /api/database-instances until the new database accepts a
// connection with its revealed password, against a bare CREATE ROLE + CREATE DATABASE + connect
// on the same engine in the same run, alternating the two. It reports the ratio of the medians
// ("x-bare"; the target is ≤ 1.3).
func BenchmarkCreateToUsable(b *testing.B) {
	a := apptest.Start(b, apptest.With(map[string]any{"ConnectionStrings:TenantPostgres": testutil.TenantPostgresURL(b),
		"RateLimit:PasswordReveal": "1000000-M", "RateLimit:PerUser": "1000000-M", "RateLimit:PerIp": "1000000-M"}))
	admin := a.AdminToken(b)
	u := a.Register(b)
	conn, err := db.Connector(testutil.TenantPostgresURL(b))
	if err != nil {
		b.Fatal(err)
	}
	bare := sql.OpenDB(conn)
	defer bare.Close()
	var svc, raw []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		r := a.Post("/api/database-instances", admin, map[string]any{"userId": u.ID})
		if r.Status != http.StatusCreated {
			b.Fatalf("create: %d %s", r.Status, r.Raw)
		}
		var it item
		r.Decode(b, &it)
		var rv reveal
		a.Get(fmt.Sprintf("/api/me/databases/%d/password", it.ID), u.Token).Decode(b, &rv)
		pool, err := connect(b, "postgres", it, rv.DatabaseUser, rv.Password)
		if err != nil {
			b.Fatal(err)
		}
		svc = append(svc, time.Since(start))
		pool.Close()

		name := fmt.Sprintf("bare_%d_%s", i, testutil.RandomSuffix())
		start = time.Now()
		for _, s := range []string{
			fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD 'bare-password-123'`, name),
			fmt.Sprintf(`CREATE DATABASE %s OWNER %s`, name, name),
		} {
			if _, err := bare.ExecContext(context.Background(), s); err != nil {
				b.Fatal(err)
			}
		}
		p2, err := connect(b, "postgres", item{Host: it.Host, Port: it.Port, DatabaseName: name}, name, "bare-password-123")
		if err != nil {
			b.Fatal(err)
		}
		raw = append(raw, time.Since(start))
		p2.Close()

		b.StopTimer()
		a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/database-instances/%d?purge=true", it.ID), Token: admin})
		_, _ = bare.Exec(fmt.Sprintf("DROP DATABASE %s WITH (FORCE)", name))
		_, _ = bare.Exec(fmt.Sprintf("DROP ROLE %s", name))
		b.StartTimer()
	}
	b.ReportMetric(float64(median(svc).Microseconds())/1000, "service-ms")
	b.ReportMetric(float64(median(raw).Microseconds())/1000, "bare-ms")
	b.ReportMetric(float64(median(svc))/float64(median(raw)), "x-bare")
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
