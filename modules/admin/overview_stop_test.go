package admin

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"provisioner/platform/summary"
	"provisioner/platform/testutil"
)

// blockingCounter counts until its context ends, telling started when it begins.
type blockingCounter struct{ started chan struct{} }

func (c blockingCounter) PlatformCounts(ctx context.Context) (map[string]int64, error) {
	c.started <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// stop cancels the background recount the metrics started and returns once it has ended; no
// recount starts after it.
func TestOverviewStopEndsRecount(t *testing.T) {
	sqldb, err := sql.Open("pgx", testutil.AdminURL())
	require.NoError(t, err)
	sqldb.SetMaxOpenConns(1) // one session: the temporary users table below stays visible
	db := bun.NewDB(sqldb, pgdialect.New())
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec("CREATE TEMP TABLE users (deleted_at timestamptz)")
	require.NoError(t, err)

	c := blockingCounter{started: make(chan struct{}, 2)}
	o := newOverview(db, nil, []summary.Counter{c}, time.Hour)
	o.cached, o.cachedAt = PlatformMetrics{Users: 7}, time.Now().Add(-40*time.Minute) // due a recount
	m, err := o.Metrics(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(7), m.Users)
	<-c.started

	o.stop() // returns only once the recount has seen its context cancelled and ended
	o.mu.Lock()
	require.False(t, o.refreshing)
	o.mu.Unlock()
	m, err = o.Metrics(context.Background())
	require.NoError(t, err)
	require.Equal(t, int64(7), m.Users)
	o.mu.Lock()
	require.False(t, o.refreshing, "no recount after stop")
	o.mu.Unlock()
}
