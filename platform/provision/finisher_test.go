package provision_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	pdb "provisioner/platform/db"
	"provisioner/platform/provision"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// things is a resource whose "provider" is an in-memory map, with faults on demand.
type things struct {
	table    string
	mu       sync.Mutex
	created  map[int64]int // resource id -> times created at the provider
	inFlight map[int64]int
	overlap  atomic.Int32
	failLeft atomic.Int32
	failWith error // the error of a failing attempt; default "provider answered 503"
	delay    time.Duration
}

// throttled is a provider's 429 with Retry-After.
type throttled struct{ wait time.Duration }

func (e *throttled) Error() string             { return "provider answered 429" }
func (e *throttled) RetryAfter() time.Duration { return e.wait }

var _ provision.RetryAfterer = (*throttled)(nil)

func (p *things) Kind() provision.Kind { return provision.Kind(p.table) }
func (p *things) Table() string        { return p.table }
func (p *things) InFlight() map[string]provision.Verb {
	return map[string]provision.Verb{"Pending": provision.VerbCreate, "Revoking": provision.VerbDelete}
}

func (p *things) enter(id int64) func() {
	p.mu.Lock()
	p.inFlight[id]++
	if p.inFlight[id] > 1 {
		p.overlap.Add(1)
	}
	p.mu.Unlock()
	return func() { p.mu.Lock(); p.inFlight[id]--; p.mu.Unlock() }
}

func (p *things) Create(ctx context.Context, req provision.CreateRequest) (provision.CreateResponse, error) {
	defer p.enter(req.ResourceID)()
	time.Sleep(p.delay)
	if p.failLeft.Add(-1) >= 0 {
		if p.failWith != nil {
			return provision.CreateResponse{}, p.failWith
		}
		return provision.CreateResponse{}, errors.New("provider answered 503")
	}
	p.mu.Lock()
	p.created[req.ResourceID]++
	p.mu.Unlock()
	_, err := req.Tx.NewUpdate().Table(p.table).Set("status = 'Active'").Where("id = ?", req.ResourceID).Exec(ctx)
	return provision.CreateResponse{ExternalID: "x"}, err
}

func (p *things) Delete(ctx context.Context, req provision.DeleteRequest) (provision.DeleteResponse, error) {
	defer p.enter(req.ResourceID)()
	p.mu.Lock()
	delete(p.created, req.ResourceID)
	p.mu.Unlock()
	_, err := req.Tx.NewUpdate().Table(p.table).Set("status = 'Revoked'").Where("id = ?", req.ResourceID).Exec(ctx)
	return provision.DeleteResponse{}, err
}

func (p *things) GiveUp(ctx context.Context, tx bun.IDB, id int64, _ error) error {
	_, err := tx.NewUpdate().Table(p.table).Set("status = 'Failed'").Where("id = ?", id).Exec(ctx)
	return err
}

func setup(t *testing.T) (*bun.DB, *things) {
	t.Helper()
	conn, err := pdb.Connector(testutil.PackageDatabase(t))
	require.NoError(t, err)
	db := bun.NewDB(sql.OpenDB(conn), pgdialect.New())
	t.Cleanup(func() { db.Close() })
	p := &things{table: "things_" + testutil.RandomSuffix(), created: map[int64]int{}, inFlight: map[int64]int{}}
	_, err = db.Exec(`CREATE TABLE ` + p.table + ` (id bigserial PRIMARY KEY, status text NOT NULL,
		attempts int NOT NULL DEFAULT 0, next_attempt_at timestamptz NOT NULL DEFAULT now(), last_error text NOT NULL DEFAULT '')`)
	require.NoError(t, err)
	return db, p
}

func insert(t *testing.T, db *bun.DB, table, status string, n int) []int64 {
	t.Helper()
	var ids []int64
	for i := 0; i < n; i++ {
		var id int64
		require.NoError(t, db.QueryRow(`INSERT INTO `+table+` (status) VALUES (?) RETURNING id`, status).Scan(&id))
		ids = append(ids, id)
	}
	return ids
}

func statuses(t *testing.T, db *bun.DB, table string) map[string]int {
	t.Helper()
	rows, err := db.Query(`SELECT status, count(*) FROM ` + table + ` GROUP BY status`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		require.NoError(t, rows.Scan(&s, &n))
		out[s] = n
	}
	return out
}

func TestFinisherDrivesEveryInFlightRow(t *testing.T) {
	db, p := setup(t)
	insert(t, db, p.table, "Pending", 20)
	insert(t, db, p.table, "Revoking", 5)
	insert(t, db, p.table, "Active", 3)
	f, err := provision.NewFinisher(db, []provision.Provisioner{p}, provision.FinisherOptions{BatchSize: 8})
	require.NoError(t, err)
	for f.RunOnce(context.Background()) > 0 {
	}
	assert.Equal(t, map[string]int{"Active": 23, "Revoked": 5}, statuses(t, db, p.table))
}

func TestFailedAttemptIsScheduledWithBackoffThenGivenUp(t *testing.T) {
	db, p := setup(t)
	ids := insert(t, db, p.table, "Pending", 1)
	p.failLeft.Store(100)
	f, err := provision.NewFinisher(db, []provision.Provisioner{p}, provision.FinisherOptions{MaxAttempts: 3})
	require.NoError(t, err)

	require.Equal(t, 1, f.RunOnce(context.Background()))
	var row struct {
		Attempts int       `bun:"attempts"`
		Next     time.Time `bun:"next_attempt_at"`
		LastErr  string    `bun:"last_error"`
		Status   string    `bun:"status"`
	}
	require.NoError(t, db.NewSelect().Table(p.table).Column("attempts", "next_attempt_at", "last_error", "status").Where("id = ?", ids[0]).Scan(context.Background(), &row))
	assert.Equal(t, 1, row.Attempts)
	assert.Equal(t, "provider answered 503", row.LastErr)
	assert.True(t, row.Next.After(time.Now()), "the next attempt waits")
	assert.Equal(t, 0, f.RunOnce(context.Background()), "not due yet")

	for i := 0; i < 2; i++ {
		_, err := db.Exec(`UPDATE `+p.table+` SET next_attempt_at = now() WHERE id = ?`, ids[0])
		require.NoError(t, err)
		f.RunOnce(context.Background())
	}
	assert.Equal(t, map[string]int{"Failed": 1}, statuses(t, db, p.table), "given up after MaxAttempts")
}

func TestReplicasNeverDriveOneRowAtOnce(t *testing.T) {
	db, p := setup(t)
	insert(t, db, p.table, "Pending", 40)
	p.delay = 5 * time.Millisecond
	var fs []*provision.Finisher
	for i := 0; i < 3; i++ {
		f, err := provision.NewFinisher(db, []provision.Provisioner{p}, provision.FinisherOptions{BatchSize: 5, Workers: 3})
		require.NoError(t, err)
		fs = append(fs, f)
	}
	var wg sync.WaitGroup
	for _, f := range fs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f.RunOnce(context.Background()) > 0 {
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, p.overlap.Load(), "a row was driven by two workers at once")
	assert.Len(t, p.created, 40)
	for id, n := range p.created {
		assert.Equal(t, 1, n, "row %d created %d times", id, n)
	}
}

func TestDriveWaitsForTheRowAndReportsNothingToDo(t *testing.T) {
	db, p := setup(t)
	ids := insert(t, db, p.table, "Pending", 1)
	f, err := provision.NewFinisher(db, []provision.Provisioner{p}, provision.FinisherOptions{})
	require.NoError(t, err)
	require.NoError(t, f.Drive(context.Background(), p.Kind(), ids[0]))
	assert.ErrorIs(t, f.Drive(context.Background(), p.Kind(), ids[0]), provision.ErrNotInFlight)
	assert.Equal(t, 1, p.created[ids[0]])
}

func TestBackoffIsCapped(t *testing.T) {
	assert.LessOrEqual(t, provision.Backoff(1, time.Minute), 1200*time.Millisecond)
	assert.LessOrEqual(t, provision.Backoff(50, time.Minute), 72*time.Second)
	assert.GreaterOrEqual(t, provision.Backoff(50, time.Minute), 48*time.Second)
}

type attemptRow struct {
	Attempts int       `bun:"attempts"`
	Next     time.Time `bun:"next_attempt_at"`
	Status   string    `bun:"status"`
}

func attempt(t *testing.T, db *bun.DB, table string, id int64) attemptRow {
	t.Helper()
	var row attemptRow
	require.NoError(t, db.NewSelect().Table(table).Column("attempts", "next_attempt_at", "status").Where("id = ?", id).Scan(context.Background(), &row))
	return row
}

// TestRetryAfterHoldsTheNextAttemptBack: a provider's 429 with Retry-After: 30 (longer than the
// first backoff of ~1 s) schedules the next attempt no sooner than 30 s; a Retry-After past
// MaxRetryAfter is capped.
func TestRetryAfterHoldsTheNextAttemptBack(t *testing.T) {
	db, p := setup(t)
	ids := insert(t, db, p.table, "Pending", 1)
	p.failLeft.Store(1)
	p.failWith = fmt.Errorf("create: %w", &throttled{wait: 30 * time.Second}) // wrapped, as modules do
	f, err := provision.NewFinisher(db, []provision.Provisioner{p}, provision.FinisherOptions{BatchSize: 1, Workers: 1})
	require.NoError(t, err)

	before := time.Now()
	require.Error(t, f.Drive(context.Background(), p.Kind(), ids[0]), "the attempt failed")
	row := attempt(t, db, p.table, ids[0])
	assert.Equal(t, 1, row.Attempts)
	assert.Equal(t, "Pending", row.Status)
	assert.False(t, row.Next.Before(before.Add(30*time.Second)), "next attempt %s is sooner than Retry-After", row.Next.Sub(before))
	for f.RunOnce(context.Background()) > 0 {
	}
	assert.Equal(t, "Pending", attempt(t, db, p.table, ids[0]).Status, "not attempted again before the wait")
	assert.Zero(t, p.created[ids[0]])

	// Capped by MaxRetryAfter.
	ids = append(ids, insert(t, db, p.table, "Pending", 1)...)
	p.failLeft.Store(1)
	p.failWith = &throttled{wait: time.Hour}
	capped, err := provision.NewFinisher(db, []provision.Provisioner{p}, provision.FinisherOptions{MaxRetryAfter: 5 * time.Second})
	require.NoError(t, err)
	before = time.Now()
	require.ErrorContains(t, capped.Drive(context.Background(), p.Kind(), ids[1]), "429")
	row = attempt(t, db, p.table, ids[1])
	assert.False(t, row.Next.Before(before.Add(5*time.Second)))
	assert.True(t, row.Next.Before(time.Now().Add(6*time.Second)), "capped at MaxRetryAfter: %s", row.Next.Sub(before))

	// A plain error keeps the plain backoff (~1 s for the first attempt).
	assert.Equal(t, time.Duration(0), func() time.Duration { d, _ := provision.RetryAfterOf(errors.New("x")); return d }())
	d, ok := provision.RetryAfterOf(fmt.Errorf("w: %w", &throttled{wait: 3 * time.Second}))
	assert.True(t, ok)
	assert.Equal(t, 3*time.Second, d)
	_, ok = provision.RetryAfterOf(&throttled{wait: -time.Second})
	assert.False(t, ok, "a Retry-After in the past asks for nothing")
}

// pruned is a things queue whose 'Done' rows are pruned, and counts the prunes.
type pruned struct {
	*things
	calls atomic.Int32
}

func (p *pruned) Prune(ctx context.Context, db bun.IDB, limit int) (int, error) {
	p.calls.Add(1)
	res, err := db.NewRaw("DELETE FROM "+p.table+" WHERE id IN (SELECT id FROM "+p.table+" WHERE status = 'Done' ORDER BY id LIMIT ?)", limit).Exec(ctx)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	return int(n), err
}

var _ provision.Pruner = (*pruned)(nil)

// TestFinisherPrunesInSmallBatches: a Pruner's done rows are pruned from the finisher's polls, at
// most PruneBatch per poll; a full batch keeps the prune due at the next poll, a partial one waits
// for PruneInterval. Rows in flight are driven as usual meanwhile.
func TestFinisherPrunesInSmallBatches(t *testing.T) {
	db, p := setup(t)
	q := &pruned{things: p}
	insert(t, db, p.table, "Done", 25)
	insert(t, db, p.table, "Pending", 1)
	f, err := provision.NewFinisher(db, []provision.Provisioner{q}, provision.FinisherOptions{PruneBatch: 10})
	require.NoError(t, err)
	for i, want := range []int{15, 5, 0} {
		f.RunOnce(context.Background())
		assert.Equal(t, want, statuses(t, db, p.table)["Done"], "after poll %d", i+1)
	}
	assert.EqualValues(t, 3, q.calls.Load())
	insert(t, db, p.table, "Done", 3)
	f.RunOnce(context.Background())
	assert.EqualValues(t, 3, q.calls.Load(), "a partial batch waits for PruneInterval")
	assert.Equal(t, map[string]int{"Active": 1, "Done": 3}, statuses(t, db, p.table))
}

// aborting is a things queue whose Create records the resource, then stores a value with a NUL
// (as a cell's answer may hold), a statement PostgreSQL refuses, which aborts the row's
// transaction; swallow
// makes it ignore that error and report success.
type aborting struct {
	*things
	swallow bool
}

func (p *aborting) Create(ctx context.Context, req provision.CreateRequest) (provision.CreateResponse, error) {
	p.mu.Lock()
	p.created[req.ResourceID]++
	p.mu.Unlock()
	if _, err := req.Tx.NewUpdate().Table(p.table).Set("status = 'Active'").Where("id = ?", req.ResourceID).Exec(ctx); err != nil {
		return provision.CreateResponse{}, err
	}
	_, err := req.Tx.NewUpdate().Table(p.table).Set("last_error = ?", "acc\x00x").Where("id = ?", req.ResourceID).Exec(ctx)
	if p.swallow {
		return provision.CreateResponse{ExternalID: "acc"}, nil
	}
	return provision.CreateResponse{}, err
}

// syncBuffer is a log sink safe for the finisher's workers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// TestAStatementErrorInTheAttemptIsRecordedWithBackoff: a provisioner's statement that fails
// inside the row's transaction (aborting it) still counts as a failed attempt, on the request
// path (Drive) and in the background alike: attempts, next_attempt_at and last_error are recorded,
// what the attempt wrote is undone, the row waits for its backoff, the failure is logged, and the
// row is given up after MaxAttempts. The same when the provisioner swallows the statement's error.
func TestAStatementErrorInTheAttemptIsRecordedWithBackoff(t *testing.T) {
	for _, swallow := range []bool{false, true} {
		t.Run(fmt.Sprintf("swallowed=%v", swallow), func(t *testing.T) {
			db, base := setup(t)
			p := &aborting{things: base, swallow: swallow}
			ids := insert(t, db, p.table, "Pending", 1)
			logs := &syncBuffer{}
			f, err := provision.NewFinisher(db, []provision.Provisioner{p}, provision.FinisherOptions{MaxAttempts: 3,
				Logger: slog.New(slog.NewTextHandler(logs, nil))})
			require.NoError(t, err)

			before := time.Now()
			require.Error(t, f.Drive(context.Background(), p.Kind(), ids[0]), "the request path's attempt failed")
			var row struct {
				Attempts int       `bun:"attempts"`
				Next     time.Time `bun:"next_attempt_at"`
				LastErr  string    `bun:"last_error"`
				Status   string    `bun:"status"`
			}
			read := func() {
				require.NoError(t, db.NewSelect().Table(p.table).Column("attempts", "next_attempt_at", "last_error", "status").
					Where("id = ?", ids[0]).Scan(context.Background(), &row))
			}
			read()
			assert.Equal(t, 1, row.Attempts, "the failed attempt is counted")
			assert.Equal(t, "Pending", row.Status, "what the attempt wrote is undone")
			assert.True(t, row.Next.After(before), "the next attempt waits for the backoff (next_attempt_at %s)", row.Next)
			assert.NotEmpty(t, row.LastErr)
			if !swallow {
				assert.Contains(t, row.LastErr, "SQLSTATE", "the statement's error")
			}
			assert.Contains(t, logs.String(), "provisioning attempt failed")
			assert.Equal(t, 0, f.RunOnce(context.Background()), "not due again before its backoff")

			for i := 0; i < 2; i++ {
				_, err := db.Exec(`UPDATE `+p.table+` SET next_attempt_at = now() WHERE id = ?`, ids[0])
				require.NoError(t, err)
				assert.Equal(t, 1, f.RunOnce(context.Background()))
			}
			read()
			assert.Equal(t, 3, row.Attempts)
			assert.Equal(t, "Failed", row.Status, "given up after MaxAttempts")
			assert.Equal(t, 3, p.created[ids[0]], "one call per attempt, none in between")
		})
	}
}

// nulErr is a provider error quoting a NUL.
type nulErr struct{}

func (nulErr) Error() string { return "provider said acc\x00x" }

// TestAnErrorWithANulIsRecorded: an attempt's error whose text holds a NUL (which PostgreSQL's
// text cannot store) is recorded without it; the attempt is counted.
func TestAnErrorWithANulIsRecorded(t *testing.T) {
	db, p := setup(t)
	ids := insert(t, db, p.table, "Pending", 1)
	p.failLeft.Store(1)
	p.failWith = nulErr{}
	f, err := provision.NewFinisher(db, []provision.Provisioner{p}, provision.FinisherOptions{})
	require.NoError(t, err)
	require.Error(t, f.Drive(context.Background(), p.Kind(), ids[0]))
	var lastErr string
	var attempts int
	require.NoError(t, db.QueryRow(`SELECT last_error, attempts FROM `+p.table+` WHERE id = ?`, ids[0]).Scan(&lastErr, &attempts))
	assert.Equal(t, "provider said accx", lastErr)
	assert.Equal(t, 1, attempts)
	assert.Equal(t, "provider said accx", provision.StoredError(nulErr{}))
}

// failingGiveUp is a things queue whose give-up fails with a statement error.
type failingGiveUp struct{ *things }

func (p *failingGiveUp) GiveUp(ctx context.Context, tx bun.IDB, id int64, _ error) error {
	_, err := tx.NewUpdate().Table(p.table).Set("status = ?", "Failed\x00").Where("id = ?", id).Exec(ctx)
	return err
}

// TestAFailingGiveUpKeepsTheAttemptRecorded: a give-up whose statement fails is undone on its own;
// the attempt stays recorded, so the row still waits for its backoff.
func TestAFailingGiveUpKeepsTheAttemptRecorded(t *testing.T) {
	db, base := setup(t)
	p := &failingGiveUp{things: base}
	ids := insert(t, db, p.table, "Pending", 1)
	p.failLeft.Store(100)
	f, err := provision.NewFinisher(db, []provision.Provisioner{p}, provision.FinisherOptions{MaxAttempts: 1})
	require.NoError(t, err)
	require.Error(t, f.Drive(context.Background(), p.Kind(), ids[0]))
	row := attempt(t, db, p.table, ids[0])
	assert.Equal(t, 1, row.Attempts)
	assert.Equal(t, "Pending", row.Status)
	assert.True(t, row.Next.After(time.Now()))
}
