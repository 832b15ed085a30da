package provision

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/outbound"
)

// FinisherOptions tunes the Finisher.
type FinisherOptions struct {
	// Interval between polls when there is no work; default 1 s.
	Interval time.Duration
	// MaxAttempts before GiveUp is called; default 8.
	MaxAttempts int
	// BatchSize is the most rows driven per poll and kind; default 16.
	BatchSize int
	// Workers is the number of rows driven at once per kind; default 4.
	Workers int
	// MaxBackoff caps the delay between attempts; default 5 min.
	MaxBackoff time.Duration
	// MaxRetryAfter caps how long a provider's Retry-After (an error implementing RetryAfterer)
	// may hold the next attempt back; default DefaultMaxRetryAfter (24 h). It only guards against
	// absurd values: a provider's wait up to it is honoured in full.
	MaxRetryAfter time.Duration
	// PruneInterval is how often the rows of a Pruner's queue that are done with are pruned;
	// default 10 min. A prune that deleted a full batch runs again at the next poll.
	PruneInterval time.Duration
	// PruneBatch is the most rows one prune deletes; default 100.
	PruneBatch int
	Logger     *slog.Logger
}

// Finisher drives rows left in an in-between state to their end. Each row is claimed with
// SELECT … FOR UPDATE SKIP LOCKED inside its own transaction, which is held while the provisioner
// works, so replicas run side by side and never drive one row at the same time; a crashed worker's
// lock dies with its connection.
type Finisher struct {
	db    *bun.DB
	o     FinisherOptions
	kinds map[Kind]Provisioner
	order []Kind

	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once

	pruneMu   sync.Mutex
	nextPrune time.Time // zero: due at the first poll
}

// DefaultMaxRetryAfter is the longest a provider's Retry-After holds an attempt back unless
// FinisherOptions.MaxRetryAfter says otherwise: a day, as outbound.ParseRetryAfter reads at most.
const DefaultMaxRetryAfter = outbound.MaxRetryAfter

// NewFinisher builds a Finisher over every provisioner; only those implementing Queue are polled.
func NewFinisher(db *bun.DB, provisioners []Provisioner, o FinisherOptions) (*Finisher, error) {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 8
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 16
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Minute
	}
	if o.MaxRetryAfter <= 0 {
		o.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if o.PruneInterval <= 0 {
		o.PruneInterval = 10 * time.Minute
	}
	if o.PruneBatch <= 0 {
		o.PruneBatch = 100
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	f := &Finisher{db: db, o: o, kinds: map[Kind]Provisioner{}, stop: make(chan struct{})}
	for _, p := range provisioners {
		if _, dup := f.kinds[p.Kind()]; dup {
			return nil, fmt.Errorf("provisioner kind %q registered twice", p.Kind())
		}
		f.kinds[p.Kind()] = p
		f.order = append(f.order, p.Kind())
	}
	return f, nil
}

// Provisioner returns the provisioner of kind, or nil.
func (f *Finisher) Provisioner(kind Kind) Provisioner { return f.kinds[kind] }

// Start launches the polling loop; Stop ends it and waits for rows in progress.
func (f *Finisher) Start() {
	f.wg.Add(1)
	go f.loop()
}

// Stop ends the loop and waits for the rows being driven.
func (f *Finisher) Stop(ctx context.Context) error {
	f.once.Do(func() { close(f.stop) })
	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *Finisher) loop() {
	defer f.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-f.stop; cancel() }()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		n := f.RunOnce(ctx)
		wait := f.o.Interval
		if n >= f.o.BatchSize {
			wait = 0 // more work is waiting
		}
		t.Reset(wait)
	}
}

// RunOnce drives up to BatchSize due rows of every kind and returns how many it drove; when a
// prune is due (every PruneInterval, the first poll included) it also prunes the Pruners' queues.
// Tests call it to settle work without waiting for the loop. Its attempts' provider calls never
// sleep (outbound.NoWait): a retryable failure is tried again at once, and one whose provider asks
// for a wait ends the attempt, rescheduled by the row's backoff no sooner than the Retry-After, so
// no worker sits out a wait.
func (f *Finisher) RunOnce(ctx context.Context) int {
	ctx = outbound.NoWait(ctx)
	f.prune(ctx)
	total := 0
	for _, kind := range f.order {
		q, ok := f.kinds[kind].(Queue)
		if !ok {
			continue
		}
		var (
			mu    sync.Mutex
			count int
			wg    sync.WaitGroup
		)
		sem := make(chan struct{}, f.o.Workers)
		for i := 0; i < f.o.BatchSize; i++ {
			if ctx.Err() != nil {
				break
			}
			sem <- struct{}{}
			wg.Add(1)
			got := make(chan bool, 1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				ok, err := f.claimAndDrive(ctx, kind, q, 0, waiter{}, func(claimed bool) { got <- claimed })
				if err != nil && ctx.Err() == nil && !ok {
					f.o.Logger.Warn("finisher poll failed", "kind", string(kind), "error", err.Error())
				}
				if ok {
					mu.Lock()
					count++
					mu.Unlock()
				}
			}()
			if !<-got { // nothing (more) due for this kind
				break
			}
		}
		wg.Wait()
		total += count
	}
	return total
}

// prune deletes one batch of done rows of every Pruner when a prune is due. A full batch keeps
// the prune due, so a backlog is worked off a batch per poll without one long statement.
func (f *Finisher) prune(ctx context.Context) {
	f.pruneMu.Lock()
	now := time.Now()
	if now.Before(f.nextPrune) {
		f.pruneMu.Unlock()
		return
	}
	f.nextPrune = now.Add(f.o.PruneInterval)
	f.pruneMu.Unlock()
	for _, kind := range f.order {
		p, ok := f.kinds[kind].(Pruner)
		if !ok || ctx.Err() != nil {
			continue
		}
		n, err := p.Prune(ctx, f.db, f.o.PruneBatch)
		if err != nil {
			if ctx.Err() == nil {
				f.o.Logger.Warn("finisher prune failed", "kind", string(kind), "error", err.Error())
			}
			continue
		}
		if n > 0 {
			f.o.Logger.Info("finisher pruned done rows", "kind", string(kind), "rows", n)
		}
		if n >= f.o.PruneBatch {
			f.pruneMu.Lock()
			f.nextPrune = time.Time{}
			f.pruneMu.Unlock()
		}
	}
}

// Drive finishes one row now (the request path after storing an intent): it waits for the row's
// lock (a Finisher elsewhere may hold it), and drives it if it is still in an in-between state.
// It returns the provisioner's error when the attempt failed and was scheduled for a retry, and
// ErrNotInFlight when there was nothing to do.
func (f *Finisher) Drive(ctx context.Context, kind Kind, id int64) error {
	return f.drive(ctx, kind, id, false)
}

// drive is Drive for a request waiting for the row's outcome (Run); fresh: it stored the row.
func (f *Finisher) drive(ctx context.Context, kind Kind, id int64, fresh bool) error {
	p := f.kinds[kind]
	q, ok := p.(Queue)
	if !ok {
		return fmt.Errorf("drive %s %d: kind has no queue", kind, id)
	}
	found, err := f.claimAndDrive(ctx, kind, q, id, waiter{waiting: true, fresh: fresh}, nil)
	if err != nil {
		return err
	}
	if !found {
		return ErrNotInFlight
	}
	return nil
}

// waiter tells a verb whether a request waits for its outcome, and whether that request stored the row.
type waiter struct{ waiting, fresh bool }

type claimed struct {
	ID       int64  `bun:"id"`
	Status   string `bun:"status"`
	Attempts int    `bun:"attempts"`
}

// claimAndDrive locks one row (a given id, waiting; or any due row, skipping locked ones), calls
// the verb for its status, and records a failed attempt. found reports whether a row was driven.
// onClaim, when set, is called exactly once as soon as it is known whether a row was claimed.
func (f *Finisher) claimAndDrive(ctx context.Context, kind Kind, q Queue, id int64, w waiter, onClaim func(bool)) (found bool, err error) {
	claimedOne := false
	if onClaim != nil {
		defer func() {
			if !claimedOne {
				onClaim(false)
			}
		}()
	}
	p := f.kinds[kind]
	inflight := q.InFlight()
	statuses := make([]string, 0, len(inflight))
	for s := range inflight {
		statuses = append(statuses, s)
	}
	tx, err := f.db.BeginTx(ctx, &sql.TxOptions{})
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()

	var row claimed
	sel := tx.NewSelect().Table(q.Table()).Column("id", "status", "attempts").
		Where("status IN (?)", bun.In(statuses))
	if id != 0 {
		sel = sel.Where("id = ?", id).For("UPDATE")
	} else {
		sel = sel.Where("next_attempt_at <= now()").OrderExpr("next_attempt_at").Limit(1).For("UPDATE SKIP LOCKED")
	}
	if err := sel.Scan(ctx, &row); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		return false, fmt.Errorf("claim %s: %w", kind, err)
	}
	if onClaim != nil {
		claimedOne = true
		onClaim(true)
	}

	// The provisioner works after a savepoint. A statement of its that fails (a value PostgreSQL
	// refuses, a constraint) aborts the transaction; rolling back to the savepoint undoes what the
	// attempt wrote and lets its failure still be recorded under the row's lock. Recorded in the
	// aborted transaction, the failure was lost with everything else: the row stayed due with
	// attempts 0, and every poll tried it again at once, with no backoff and no give-up.
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+attemptSavepoint); err != nil {
		return true, fmt.Errorf("savepoint before %s %d: %w", kind, row.ID, err)
	}
	verbErr := f.verb(ctx, kind, p, inflight[row.Status], row, tx, w)
	if verbErr != nil && ctx.Err() != nil {
		return true, verbErr // shutting down: the rollback leaves the row as it was
	}
	// RELEASE fails in a transaction a statement aborted (25P02), whether or not the provisioner
	// reported that statement's error.
	undone := false
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+attemptSavepoint); err != nil {
		if ctx.Err() != nil {
			return true, err
		}
		if _, rerr := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+attemptSavepoint); rerr != nil {
			f.o.Logger.Error("finisher could not record a failed attempt", "kind", string(kind), "id", row.ID,
				"attempt", row.Attempts+1, "error", rerr.Error())
			return true, fmt.Errorf("roll back the attempt of %s %d: %w", kind, row.ID, rerr)
		}
		undone = true
		if verbErr == nil {
			verbErr = fmt.Errorf("%s %d: a statement of the attempt failed and its transaction was aborted (%v)", kind, row.ID, err)
		}
	}
	var refused *Refused
	if undone && errors.As(verbErr, &refused) { // the refusal's own statements failed: the row is as it was
		verbErr = fmt.Errorf("%s %d: recording a refusal failed (%v)", kind, row.ID, refused.Err)
	}
	if verbErr != nil && !errors.As(verbErr, &refused) { // a refusal ended the row: not a failed attempt
		attempts := row.Attempts + 1
		next := time.Now().Add(f.delay(attempts, verbErr))
		if at, ok := DeferredUntil(verbErr); ok { // put off, not an attempt: not counted
			attempts, next = row.Attempts, at
		}
		f.o.Logger.Warn("provisioning attempt failed", "kind", string(kind), "id", row.ID,
			"attempt", attempts, "undone", undone, "error", StoredError(verbErr))
		if err := f.recordFailure(ctx, tx, kind, p, q, row.ID, attempts, attempts > row.Attempts, next, verbErr); err != nil {
			f.o.Logger.Error("finisher could not record a failed attempt", "kind", string(kind), "id", row.ID,
				"attempt", attempts, "error", err.Error())
			return true, err
		}
	}
	if err := tx.Commit(); err != nil {
		f.o.Logger.Error("finisher could not commit an attempt", "kind", string(kind), "id", row.ID, "error", err.Error())
		return true, fmt.Errorf("commit %s %d: %w", kind, row.ID, err)
	}
	return true, verbErr
}

// attemptSavepoint and giveUpSavepoint fence the provisioner's work inside a row's transaction.
const (
	attemptSavepoint = "provision_attempt"
	giveUpSavepoint  = "provision_give_up"
)

// verb calls the provisioner's verb for row.
func (f *Finisher) verb(ctx context.Context, kind Kind, p Provisioner, v Verb, row claimed, tx bun.Tx, w waiter) error {
	switch v {
	case VerbCreate:
		_, err := p.Create(ctx, CreateRequest{ResourceID: row.ID, Attempt: row.Attempts, Tx: tx, Waiting: w.waiting, Fresh: w.fresh})
		return err
	case VerbDelete:
		_, err := p.Delete(ctx, DeleteRequest{ResourceID: row.ID, Attempt: row.Attempts, Tx: tx})
		return err
	case VerbSuspend, VerbResume:
		s, ok := p.(Suspender)
		switch {
		case !ok:
			return fmt.Errorf("%s cannot be suspended or resumed", kind)
		case v == VerbSuspend:
			return s.Suspend(ctx, SuspendRequest{ResourceID: row.ID, Tx: tx})
		default:
			return s.Resume(ctx, ResumeRequest{ResourceID: row.ID, Tx: tx})
		}
	}
	return nil
}

// recordFailure records a failed attempt of row id (attempts, counted when the failure was an
// attempt and not a Deferred) and schedules the next one at next; when counted attempts have run
// out it gives the row up. A give-up that fails is undone on its own (it is tried again after the
// next failed attempt): the attempt stays recorded, so backoff still applies.
func (f *Finisher) recordFailure(ctx context.Context, tx bun.Tx, kind Kind, p Provisioner, q Queue, id int64, attempts int, counted bool, next time.Time, verbErr error) error {
	shown := verbErr
	if t, ok := p.(ErrorTexter); ok {
		shown = errors.New(t.ErrorText(verbErr))
	}
	if _, err := Attempted(tx.NewUpdate().Table(q.Table()).Set("attempts = ?", attempts).Set("next_attempt_at = ?", next), shown).
		Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("record attempt of %s %d: %w", kind, id, err)
	}
	g, ok := p.(GiveUpper)
	if !ok || !counted || attempts < f.o.MaxAttempts {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "SAVEPOINT "+giveUpSavepoint); err != nil {
		return fmt.Errorf("savepoint before giving up %s %d: %w", kind, id, err)
	}
	if gerr := g.GiveUp(ctx, tx, id, verbErr); gerr != nil {
		if _, err := tx.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+giveUpSavepoint); err != nil {
			return fmt.Errorf("give up %s %d: %w (then: %w)", kind, id, gerr, err)
		}
		f.o.Logger.Error("finisher could not give a row up; tried again after its next attempt", "kind", string(kind),
			"id", id, "attempt", attempts, "error", gerr.Error())
		return nil
	}
	if _, err := tx.ExecContext(ctx, "RELEASE SAVEPOINT "+giveUpSavepoint); err != nil {
		return fmt.Errorf("give up %s %d: %w", kind, id, err)
	}
	return nil
}

// delay is the wait before the next attempt: the backoff, or the provider's Retry-After (capped
// by MaxRetryAfter) when that is longer.
func (f *Finisher) delay(attempts int, err error) time.Duration {
	d := Backoff(attempts, f.o.MaxBackoff)
	if ra, ok := RetryAfterOf(err); ok {
		d = max(d, min(ra, f.o.MaxRetryAfter))
	}
	return d
}

// Backoff is the capped exponential delay before attempt n+1, with ±20% jitter.
func Backoff(attempt int, max time.Duration) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := time.Second << min(attempt-1, 20)
	if d > max || d <= 0 {
		d = max
	}
	jitter := 0.8 + rand.Float64()*0.4
	return time.Duration(float64(d) * jitter)
}

// MaxStoredError is how much of an attempt's error the finisher keeps (last_error).
const MaxStoredError = 2000

// StoredError is err's text as the finisher stores it: valid UTF-8 without NUL (PostgreSQL's text
// cannot hold one: the record of the attempt would fail), at most MaxStoredError bytes (a give-up
// hook that stores, logs or audits the error uses it too).
func StoredError(err error) string {
	s := strings.ReplaceAll(strings.ToValidUTF8(err.Error(), "?"), "\x00", "")
	if len(s) <= MaxStoredError {
		return s
	}
	return strings.ToValidUTF8(s[:MaxStoredError], "")
}

// DriveNow is Drive for the request path that just stored an intent: a row already finished
// (by a Finisher elsewhere) is not an error.
func (f *Finisher) DriveNow(ctx context.Context, kind Kind, id int64) error {
	if err := f.Drive(ctx, kind, id); err != nil && !errors.Is(err, ErrNotInFlight) {
		return err
	}
	return nil
}
