package coherent_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"provisioner/migrations"
	"provisioner/platform/coherent"
	"provisioner/platform/db"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

var opts = coherent.Options{Heartbeat: 20 * time.Millisecond, Window: 400 * time.Millisecond}

// schema creates the trigger functions (from the platform migration) and a table of widgets
// whose cache entries are tagged by owner.
func schema(t *testing.T) *bun.DB {
	t.Helper()
	ctx := context.Background()
	d := open(t)
	names, err := fs.Glob(migrations.FS, "*_coherent.tx.up.sql")
	require.NoError(t, err)
	require.Len(t, names, 1)
	up, err := fs.ReadFile(migrations.FS, names[0])
	require.NoError(t, err)
	// The users part of that migration needs the users table; the functions come first.
	fn := string(up)[:strings.Index(string(up), "-- The principal")]
	_, err = d.ExecContext(ctx, fn)
	require.NoError(t, err)
	_, err = d.ExecContext(ctx, `
		CREATE TABLE IF NOT EXISTS widgets (id bigserial PRIMARY KEY, owner bigint NOT NULL, name text NOT NULL);
		SELECT coherent_watch('widgets', 'owner');`)
	require.NoError(t, err)
	return d
}

func open(t *testing.T) *bun.DB {
	t.Helper()
	return openURL(t, testutil.PackageDatabase(t))
}

func openURL(t *testing.T, url string) *bun.DB {
	t.Helper()
	d, err := db.Open(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// replica is one process's view: its own connections, bus and cache of widget names by owner.
type replica struct {
	db    *bun.DB
	bus   *coherent.Bus
	cache *coherent.Cache[int64, []string]
	loads atomic.Int64
}

func startReplica(t *testing.T) *replica {
	t.Helper()
	return startReplicaOn(t, open(t))
}

func startReplicaOn(t *testing.T, d *bun.DB) *replica {
	t.Helper()
	return startReplicaWith(t, d, opts)
}

func startReplicaWith(t *testing.T, d *bun.DB, o coherent.Options) *replica {
	t.Helper()
	r := &replica{db: d}
	r.bus = coherent.New(r.db, o)
	r.cache = coherent.NewCache(r.bus, coherent.CacheOptions[int64, []string]{
		Table: "widgets", Tag: func(owner int64, _ []string) string { return fmt.Sprint(owner) },
	})
	r.bus.Start()
	t.Cleanup(func() { _ = r.bus.Stop(context.Background()) })
	require.Eventually(t, r.bus.Fresh, 5*time.Second, 5*time.Millisecond, "the bus becomes fresh")
	return r
}

func (r *replica) names(t *testing.T, owner int64) []string {
	t.Helper()
	v, err := r.cache.Get(context.Background(), owner, func(ctx context.Context) ([]string, error) {
		r.loads.Add(1)
		return r.load(ctx, owner)
	})
	require.NoError(t, err)
	return v
}

func (r *replica) load(ctx context.Context, owner int64) ([]string, error) {
	out := []string{}
	err := r.db.NewSelect().Table("widgets").Column("name").Where("owner = ?", owner).OrderExpr("id").Scan(ctx, &out)
	return out, err
}

var owners atomic.Int64

func newOwner() int64 { return time.Now().UnixNano()/1000 + owners.Add(1) }

func TestCacheServesRepeatedReadsWithoutLoading(t *testing.T) {
	d := schema(t)
	owner := newOwner()
	_, err := d.ExecContext(context.Background(), "INSERT INTO widgets (owner, name) VALUES (?, 'a')", owner)
	require.NoError(t, err)
	r := startReplica(t)
	require.NoError(t, r.bus.Sync(context.Background()))
	for range 5 {
		assert.Equal(t, []string{"a"}, r.names(t, owner))
	}
	assert.EqualValues(t, 1, r.loads.Load(), "one load, then hits")
}

// TestAChangeIsSeenOnEveryReplicaAfterSync: a write committed by anyone (here plain SQL) and a
// Sync on one replica: the next read on the other replica, which applies the feed 100 ms late,
// returns the new value.
func TestAChangeIsSeenOnEveryReplicaAfterSync(t *testing.T) {
	d := schema(t)
	lagging := opts
	lagging.Lag = 100 * time.Millisecond
	a, b := startReplica(t), startReplicaWith(t, open(t), lagging)
	owner := newOwner()
	assert.Empty(t, a.names(t, owner))
	assert.Empty(t, b.names(t, owner))
	for i, name := range []string{"first", "second", "third"} {
		_, err := d.ExecContext(context.Background(), "INSERT INTO widgets (owner, name) VALUES (?, ?)", owner, name)
		require.NoError(t, err)
		require.NoError(t, a.bus.Sync(context.Background()))
		assert.Len(t, b.names(t, owner), i+1, "replica b after a's sync")
		assert.Len(t, a.names(t, owner), i+1, "replica a after its own sync")
	}
	_, err := d.ExecContext(context.Background(), "DELETE FROM widgets WHERE owner = ?", owner)
	require.NoError(t, err)
	require.NoError(t, b.bus.Sync(context.Background()))
	assert.Empty(t, a.names(t, owner), "a delete too")
}

func TestOtherOwnersEntriesSurviveAChange(t *testing.T) {
	d := schema(t)
	r := startReplica(t)
	one, two := newOwner(), newOwner()
	r.names(t, one)
	r.names(t, two)
	_, err := d.ExecContext(context.Background(), "INSERT INTO widgets (owner, name) VALUES (?, 'x')", one)
	require.NoError(t, err)
	require.NoError(t, r.bus.Sync(context.Background()))
	before := r.loads.Load()
	assert.Equal(t, []string{"x"}, r.names(t, one))
	assert.Empty(t, r.names(t, two))
	assert.Equal(t, before+1, r.loads.Load(), "only the changed owner is loaded again")
}

// TestALoadRacingAChangeIsNotKept: the row changes (and the change is applied) while a load is
// reading the old value: that value is returned to its caller but never served from the cache.
func TestALoadRacingAChangeIsNotKept(t *testing.T) {
	d := schema(t)
	r := startReplica(t)
	owner := newOwner()
	ctx := context.Background()
	v, err := r.cache.Get(ctx, owner, func(ctx context.Context) ([]string, error) {
		old, err := r.load(ctx, owner)
		if err != nil {
			return nil, err
		}
		if _, err := d.ExecContext(ctx, "INSERT INTO widgets (owner, name) VALUES (?, 'new')", owner); err != nil {
			return nil, err
		}
		return old, r.bus.Sync(ctx) // the change is applied before this load ends
	})
	require.NoError(t, err)
	assert.Empty(t, v, "the racing load read the old state")
	assert.Equal(t, []string{"new"}, r.names(t, owner), "and it was not kept")
}

func TestErrorsAreNotCached(t *testing.T) {
	schema(t)
	r := startReplica(t)
	calls := 0
	for range 3 {
		_, err := r.cache.Get(context.Background(), newOwner(), func(context.Context) ([]string, error) {
			calls++
			return nil, sql.ErrNoRows
		})
		assert.ErrorIs(t, err, sql.ErrNoRows)
	}
	assert.Equal(t, 3, calls)
}

func TestWithoutARunningBusEveryReadLoads(t *testing.T) {
	d := schema(t)
	bus := coherent.New(d, opts) // never started
	c := coherent.NewCache(bus, coherent.CacheOptions[int64, int]{Table: "widgets", Tag: func(int64, int) string { return "1" }})
	n := 0
	for range 3 {
		_, _ = c.Get(context.Background(), 1, func(context.Context) (int, error) { n++; return n, nil })
	}
	assert.Equal(t, 3, n)
	assert.False(t, bus.Fresh())
	assert.ErrorIs(t, bus.Sync(context.Background()), coherent.ErrNotStarted)
}

// TestAReplicaThatLeftIsNotWaitedFor: Stop announces the departure, so a Sync on the remaining
// replica completes on its own acknowledgements instead of waiting out its 30 s window.
func TestAReplicaThatLeftIsNotWaitedFor(t *testing.T) {
	schema(t)
	long := opts
	long.Window = 30 * time.Second
	a, b := startReplicaWith(t, open(t), long), startReplica(t)
	require.NoError(t, a.bus.Sync(context.Background()))
	require.NoError(t, b.bus.Stop(context.Background()))
	done := make(chan error, 1)
	go func() { done <- a.bus.Sync(context.Background()) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Sync did not return")
	}
}

// TestLostListenerEmptiesTheCache: the replica's connections to the database are cut, a change is
// committed while it cannot listen (its notification never reaches the replica), then the
// connections come back: the replica reads the change, because a new listener starts from an
// empty cache; while cut it does not serve from the cache at all.
func TestLostListenerEmptiesTheCache(t *testing.T) {
	d := schema(t)
	u, err := url.Parse(testutil.PackageDatabase(t))
	require.NoError(t, err)
	proxy := testutil.StartProxy(t, u.Host)
	u.Host = proxy.Addr
	r := startReplicaOn(t, openURL(t, u.String()))
	owner := newOwner()
	assert.Empty(t, r.names(t, owner))

	proxy.Cut()
	require.Eventually(t, func() bool { return !r.bus.Fresh() }, 5*time.Second, 5*time.Millisecond, "cut: caches bypassed")
	_, err = d.ExecContext(context.Background(), "INSERT INTO widgets (owner, name) VALUES (?, 'written-while-cut')", owner)
	require.NoError(t, err)
	proxy.Restore()
	require.Eventually(t, r.bus.Fresh, 10*time.Second, 5*time.Millisecond, "listening again")
	assert.Equal(t, []string{"written-while-cut"}, r.names(t, owner))
}

// TestMiddlewareSyncsAfterAWrite: a request that wrote through bun answers only once the other
// replica applied the write.
func TestMiddlewareSyncsAfterAWrite(t *testing.T) {
	schema(t)
	da := open(t)
	da.AddQueryHook(coherent.WriteHook{})
	a, b := startReplicaOn(t, da), startReplica(t)
	owner := newOwner()
	assert.Empty(t, b.names(t, owner))
	app := fiber.New()
	app.Use(coherent.Middleware(a.bus))
	app.Post("/widgets", func(c *fiber.Ctx) error {
		_, err := a.db.ExecContext(c.UserContext(), "INSERT INTO widgets (owner, name) VALUES (?, 'w')", owner)
		return err
	})
	for i := range 20 { // each answer comes only after the other replica applied the write
		res, err := app.Test(httptest.NewRequest("POST", "/widgets", nil), 10_000)
		require.NoError(t, err)
		require.Equal(t, 200, res.StatusCode)
		require.Len(t, b.names(t, owner), i+1, "the other replica reads the write as soon as the answer came")
	}
}

func TestWriteHookMarksWritesOnly(t *testing.T) {
	d := open(t)
	d.AddQueryHook(coherent.WriteHook{})
	ctx := context.Background()
	cases := []struct {
		query string
		wrote bool
	}{
		{"SELECT 1", false},
		{"select pg_notify('x', 'y')", false},
		{"BEGIN; ROLLBACK", false},
		{"CREATE TEMP TABLE IF NOT EXISTS hook_t (x int)", true},
		{"INSERT INTO hook_t VALUES (1)", true},
		{"update hook_t SET x = 2", true},
		{"WITH d AS (DELETE FROM hook_t RETURNING x) SELECT count(*) FROM d", true},
	}
	conn, err := d.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	for _, c := range cases {
		t.Run(c.query, func(t *testing.T) {
			mctx, m := coherent.WithWriteMarker(ctx)
			_, err := conn.ExecContext(mctx, c.query)
			require.NoError(t, err)
			assert.Equal(t, c.wrote, m.Load())
		})
	}
}

func TestMetricsCountHitsMissesAndFreshness(t *testing.T) {
	schema(t)
	r := startReplica(t)
	owner := newOwner()
	for range 4 {
		r.names(t, owner)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(r.bus.Collector())
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" {
					name += ":" + l.GetValue()
				}
			}
			got[name] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	assert.Equal(t, map[string]float64{"coherent_fresh": 1, "coherent_cache_entries": 1,
		"coherent_cache_lookups_total:hit": 3, "coherent_cache_lookups_total:miss": 1, "coherent_cache_lookups_total:bypass": 0}, got)
}

// BenchmarkSync is what a request that wrote pays before its answer leaves: alone, and with a
// second replica to acknowledge.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			var buses []*coherent.Bus
			for range n {
				d, err := db.Open(context.Background(), testutil.PackageDatabase(b))
				require.NoError(b, err)
				bus := coherent.New(d, coherent.Options{})
				bus.Start()
				buses = append(buses, bus)
				defer func() { _ = bus.Stop(context.Background()); _ = d.Close() }()
			}
			require.Eventually(b, func() bool { return buses[0].Fresh() && buses[n-1].Fresh() }, 5*time.Second, time.Millisecond)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if err := buses[0].Sync(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestOnlyWatchedColumnsInvalidate: a table watched on some columns (as ai_keys is, not on its usage
// counters) keeps its entries when another column changes, and drops them when a watched one does.
func TestOnlyWatchedColumnsInvalidate(t *testing.T) {
	d := schema(t)
	ctx := context.Background()
	_, err := d.ExecContext(ctx, `
		CREATE TABLE IF NOT EXISTS gadgets (id bigserial PRIMARY KEY, name text NOT NULL, uses bigint NOT NULL DEFAULT 0);
		SELECT coherent_watch('gadgets', 'id', ARRAY['name']);`)
	require.NoError(t, err)
	var id int64
	require.NoError(t, d.QueryRowContext(ctx, "INSERT INTO gadgets (name) VALUES ('old') RETURNING id").Scan(&id))
	r := startReplicaOn(t, open(t))
	gadgets := coherent.NewCache(r.bus, coherent.CacheOptions[int64, string]{
		Table: "gadgets", Tag: func(id int64, _ string) string { return fmt.Sprint(id) },
	})
	loads := 0
	name := func() string {
		v, err := gadgets.Get(ctx, id, func(ctx context.Context) (string, error) {
			loads++
			var n string
			return n, r.db.QueryRowContext(ctx, "SELECT name FROM gadgets WHERE id = ?", id).Scan(&n)
		})
		require.NoError(t, err)
		return v
	}
	require.Equal(t, "old", name())
	_, err = d.ExecContext(ctx, "UPDATE gadgets SET uses = uses + 1 WHERE id = ?", id)
	require.NoError(t, err)
	require.NoError(t, r.bus.Sync(ctx))
	assert.Equal(t, "old", name())
	assert.Equal(t, 1, loads, "an unwatched column changed: still cached")
	_, err = d.ExecContext(ctx, "UPDATE gadgets SET name = 'new' WHERE id = ?", id)
	require.NoError(t, err)
	require.NoError(t, r.bus.Sync(ctx))
	assert.Equal(t, "new", name())
	assert.Equal(t, 2, loads)
}
