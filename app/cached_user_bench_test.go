package app_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"provisioner/app/apptest"
	"provisioner/platform/authn"
	"provisioner/platform/testutil"
)

// BenchmarkCachedUserMemory measures what the service keeps per user signed in (P11, "per cached
// user"): CACHED users (default 2,000) seeded with a session and a database each, each asks
// GET /api/me/databases once as scripts/bench-scale.sh does (the principal, the session, the
// verified token, the per-user limit's share and the list are then held), after the same traffic
// from 200 other users (sent by 8 clients at once as the measured traffic is, so that the pools of
// connections and their buffers are as large before as after). It reports the live heap's growth
// per user ("B/cached-user", after a collection before and after; resident memory grows by up to
// about twice that, the heap's growth room).
func BenchmarkCachedUserMemory(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("CACHED")); err == nil && v > 0 {
		n = v
	}
	a := apptest.Start(b, apptest.With(map[string]any{"RateLimit:PerUser": "1000000000-M", "RateLimit:PerIp": "1000000000-M",
		"Server:MaxConnectionsPerIp": 0}))
	const warm = 200
	tokens := seedSignedIn(b, a, warm+n)
	get := func(token string) {
		req, _ := http.NewRequest(http.MethodGet, a.URL+"/api/me/databases", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := a.Client.Do(req)
		if err != nil {
			b.Error(err)
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			b.Errorf("GET /api/me/databases: %d", res.StatusCode)
		}
	}
	// send asks for the list once with each token, 8 requests at a time.
	send := func(tokens []string) {
		var wg sync.WaitGroup
		next := make(chan string)
		for range 8 {
			wg.Go(func() {
				for t := range next {
					get(t)
				}
			})
		}
		for _, t := range tokens {
			next <- t
		}
		close(next)
		wg.Wait()
	}
	send(tokens[:warm])
	var per float64
	for range b.N {
		before := liveHeap()
		send(tokens[warm:])
		per = float64(liveHeap()-before) / float64(n)
	}
	b.ReportMetric(per, "B/cached-user")
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// seedSignedIn seeds n users with a session and a database each, as scripts/bench-scale.sh's
// benchkit seed and tokens do, and returns an access token per user.
func seedSignedIn(b *testing.B, a *apptest.App, n int) []string {
	ctx := context.Background()
	domain := "@" + testutil.RandomSuffix() + ".test"
	_, err := a.DB.ExecContext(ctx, `INSERT INTO users (email, full_name, organization, role, security_stamp)
		SELECT 'cached' || i || ?, 'Cached User ' || i, 'Org', 'User', 1 FROM generate_series(1, ?) i`, domain, n)
	if err != nil {
		b.Fatal(err)
	}
	_, err = a.DB.ExecContext(ctx, `INSERT INTO database_instances (user_id, name, engine, database_name, database_user,
		password_sealed, status, max_space_bytes) SELECT id, 'seed', 'postgres', 'seed_' || id, 'seed_' || id, 'v1.x.y', 'Active', 536870912
		FROM users WHERE email LIKE '%' || ?`, domain)
	if err != nil {
		b.Fatal(err)
	}
	rows, err := a.DB.QueryContext(ctx, `INSERT INTO auth_sessions (user_id, provider, stamp, role, expires_at)
		SELECT id, 'password', security_stamp, role, now() + interval '1 day' FROM users WHERE email LIKE '%' || ?
		RETURNING id, user_id, (SELECT email FROM users u WHERE u.id = user_id), (SELECT full_name FROM users u WHERE u.id = user_id)`, domain)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	t, err := authn.NewTokens(authn.Options{Key: []byte(a.Cfg.Jwt.Key), Issuer: a.Cfg.Jwt.Issuer, Audience: a.Cfg.Jwt.Audience,
		Expiry: a.Cfg.Jwt.Expiry()})
	if err != nil {
		b.Fatal(err)
	}
	var out []string
	for rows.Next() {
		var sid, uid int64
		var email, name string
		if err := rows.Scan(&sid, &uid, &email, &name); err != nil {
			b.Fatal(err)
		}
		tok, err := t.Issue(authn.User{ID: uid, Email: email, Name: name, Role: authn.RoleUser, SecurityStamp: 1, SessionID: sid})
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, tok.Token)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	if len(out) != n {
		b.Fatalf("seeded %d sessions, want %d", len(out), n)
	}
	// The seeding's change notifications are applied (and their marks kept) before measuring.
	if err := a.Bus.Sync(ctx); err != nil {
		b.Fatal(err)
	}
	return out
}
