package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/app/apptest"
)

// queryLog records the SQL the app runs while on is set.
type queryLog struct {
	mu  sync.Mutex
	on  bool
	sql []string
}

func (l *queryLog) BeforeQuery(ctx context.Context, _ *bun.QueryEvent) context.Context { return ctx }

func (l *queryLog) AfterQuery(_ context.Context, e *bun.QueryEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.on {
		l.sql = append(l.sql, e.Query)
	}
}

// seqScans lists the relations of plan (EXPLAIN FORMAT JSON output) read by a Seq Scan.
func seqScans(node map[string]any) []string {
	var out []string
	if node["Node Type"] == "Seq Scan" {
		out = append(out, fmt.Sprint(node["Relation Name"]))
	}
	if plans, ok := node["Plans"].([]any); ok {
		for _, p := range plans {
			out = append(out, seqScans(p.(map[string]any))...)
		}
	}
	return out
}

// The admin list pages, the search, a user's dashboard and the platform metrics read users and
// database_instances through indexes: with 20,000 of each seeded and analysed, no query behind
// those routes plans a Seq Scan of either table, except the platform metrics' whole-table counts
// (cached for 60 s, recounted in the background). A list's total is a count bounded by a LIMIT,
// never a count of every matching row. The search asks the trigram index for its longest word.
func TestAdminQueriesUseIndexes(t *testing.T) {
	log := &queryLog{}
	a := apptest.Start(t, apptest.WithFx(fx.Invoke(func(db *bun.DB) { db.AddQueryHook(log) })))
	t.Cleanup(func() {
		// The package's tests share the control database: the seeded rows go again.
		_, _ = a.DB.Exec(`DELETE FROM database_instances WHERE database_name LIKE 'seed\_%'`)
		_, _ = a.DB.Exec(`DELETE FROM users WHERE email LIKE 'seed%@scale.test'`)
	})
	for _, q := range []string{
		`INSERT INTO users (email, full_name, organization, role, security_stamp, created_at)
		 SELECT 'seed' || g || '@scale.test', 'Seed User ' || g, 'Org ' || (g % 500), 'User', 1, now() - g * interval '1 s'
		 FROM generate_series(1, 20000) g`,
		`INSERT INTO database_instances (user_id, name, engine, database_name, database_user, password_sealed, status, max_space_bytes)
		 SELECT u.id, 'seed', 'postgres', 'seed_' || u.id, 'seed_' || u.id, 'v1.x.y',
		   (ARRAY['Active','Active','Active','Active','Active','Active','Active','Paused','Failed','Deleted'])[1 + u.id % 10], 536870912
		 FROM users u WHERE u.email LIKE 'seed%@scale.test'`,
		`VACUUM ANALYZE users`, `VACUUM ANALYZE database_instances`,
	} {
		_, err := a.DB.Exec(q)
		require.NoError(t, err)
	}
	admin := a.AdminToken(t)
	var someone int64
	require.NoError(t, a.DB.QueryRow("SELECT id FROM users WHERE email = 'seed7777@scale.test'").Scan(&someone))

	log.mu.Lock()
	log.on = true
	log.mu.Unlock()
	for _, p := range []string{
		"/api/users?page=50&pageSize=100",
		"/api/users?role=Admin",
		"/api/users?search=seed%20User%207777&pageSize=20",
		"/api/database-instances?page=10&pageSize=100",
		fmt.Sprintf("/api/database-instances?userId=%d", someone),
		"/api/database-instances?status=Failed",
		fmt.Sprintf("/api/users/%d", someone),
		fmt.Sprintf("/api/users/%d/dashboard", someone),
		"/api/metrics/platform",
	} {
		r := a.Get(p, admin)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", p, r.Raw)
	}
	log.mu.Lock()
	log.on = false
	queries := append([]string(nil), log.sql...)
	log.mu.Unlock()

	// The totals: counted 10,000 past the page's first item, a lower bound past that.
	var own int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM database_instances WHERE user_id = ? AND status <> 'Deleted'", someone).Scan(&own))
	for p, want := range map[string]struct {
		total int
		exact bool
	}{
		"/api/users?page=50&pageSize=100":                         {4900 + 10_000, false},
		"/api/users?search=seed%20User%207777&pageSize=20":        {1, true},
		"/api/database-instances?page=10&pageSize=100":            {900 + 10_000, false},
		fmt.Sprintf("/api/database-instances?userId=%d", someone): {own, true},
	} {
		var page struct {
			TotalCount      int  `json:"totalCount"`
			TotalCountExact bool `json:"totalCountExact"`
		}
		a.Get(p, admin).Decode(t, &page)
		require.Equal(t, want.total, page.TotalCount, p)
		require.Equal(t, want.exact, page.TotalCountExact, p)
	}

	checked, counted, searched := 0, 0, 0
	for _, q := range queries {
		if !strings.HasPrefix(strings.TrimSpace(q), "SELECT") ||
			!(strings.Contains(q, `"users"`) || strings.Contains(q, "users ") || strings.Contains(q, "database_instances")) {
			continue
		}
		var out string
		require.NoError(t, a.DB.QueryRow("EXPLAIN (FORMAT JSON) "+q).Scan(&out), q)
		var plan []struct {
			Plan map[string]any `json:"Plan"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &plan))
		checked++
		metrics := strings.Contains(q, "count(*) FILTER (WHERE status <> 'Deleted')") || strings.Contains(q, `SELECT count(*) FROM "users"`)
		if strings.Contains(q, "count(") && !metrics {
			// A list's total counts at most paging.CountHorizon past the page: count(*) over a LIMIT.
			counted++
			if !strings.Contains(q, "AS matching") || !strings.Contains(q, "LIMIT") {
				t.Errorf("a count of every matching row:\n%s", q)
			}
		}
		if strings.Contains(q, "strpos(") && strings.Contains(out, `"Index Name": "users_search_trgm_idx"`) {
			// The search asks the trigram index for its longest word only, checking the rest by strpos.
			searched++
			require.Contains(t, out, `~~ '% 7777%'::text)`, q)
		}
		for _, rel := range seqScans(plan[0].Plan) {
			if rel != "users" && rel != "database_instances" {
				continue
			}
			if metrics {
				continue // the platform metrics' counts of every row, cached for 60 s, recounted in the background
			}
			t.Errorf("Seq Scan on %s:\n%s\n%s", rel, q, out)
		}
	}
	require.GreaterOrEqual(t, checked, 9, "queries behind the routes: %q", queries)
	require.GreaterOrEqual(t, counted, 2, "bounded counts behind the list pages: %q", queries)
	require.GreaterOrEqual(t, searched, 1, "the search's scan of users_search_trgm_idx: %q", queries)
}
