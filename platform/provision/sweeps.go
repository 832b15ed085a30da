package provision

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"
)

// Statuses of a sweep: Sweeping until the provider answered (Swept: whatever of the row's it held
// is deleted, or it held nothing) or the sweep was given up (SweepGaveUp, with its last error).
const (
	Sweeping    = "Sweeping"
	Swept       = "Swept"
	SweepGaveUp = "GaveUp"
)

// SweepQueue names a table of sweeps (Sweeps): the stored intent to make sure a provider holds
// nothing more of a row of Rows that is no longer live. Sweeps has the columns id, Ref (the swept
// row's id), status (Sweeping, Swept, SweepGaveUp), Retries' columns, created_at and updated_at.
type SweepQueue struct {
	Sweeps, Rows, Ref string
}

// Queue stores, in tx, a sweep for every row of Rows matching where (a condition on alias r,
// with args) that has none waiting yet. Callers hold the rows' locks (they have just updated
// them), so two sweeps of one row are not queued at once.
func (q SweepQueue) Queue(ctx context.Context, tx bun.IDB, where string, args ...any) error {
	if _, err := tx.NewRaw("INSERT INTO ? (?) SELECT r.id FROM ? AS r WHERE ("+where+
		") AND NOT EXISTS (SELECT 1 FROM ? l WHERE l.? = r.id AND l.status = ?)",
		slices.Concat([]any{bun.Ident(q.Sweeps), bun.Ident(q.Ref), bun.Ident(q.Rows)}, args, []any{bun.Ident(q.Sweeps), bun.Ident(q.Ref), Sweeping})...).
		Exec(ctx); err != nil {
		return fmt.Errorf("queue sweeps in %s: %w", q.Sweeps, err)
	}
	return nil
}

// QueueAfter stores, in tx, a sweep of row id due after wait, unless one is waiting already. The
// caller holds the row's lock.
func (q SweepQueue) QueueAfter(ctx context.Context, tx bun.IDB, id int64, wait time.Duration) error {
	if _, err := tx.NewRaw("INSERT INTO ? (?, next_attempt_at) SELECT ?, now() + ? * interval '1 second' "+
		"WHERE NOT EXISTS (SELECT 1 FROM ? l WHERE l.? = ? AND l.status = ?)",
		bun.Ident(q.Sweeps), bun.Ident(q.Ref), id, int64(wait/time.Second), bun.Ident(q.Sweeps), bun.Ident(q.Ref), id, Sweeping).Exec(ctx); err != nil {
		return fmt.Errorf("queue the sweep of %s %d in %s: %w", q.Rows, id, q.Sweeps, err)
	}
	return nil
}

// Sweeper is the Finisher's side of a SweepQueue: it drives each Sweeping sweep (Sweep, then
// Swept), retries a failing one at the Finisher's backoff, gives it up (SweepGaveUp, then GaveUp)
// at its first failed attempt once it is GiveUpAfter old and has failed Finisher:MaxAttempts
// times, and prunes ended sweeps Retention after they ended. The module supplies only the
// provider's part.
type Sweeper struct {
	SweepQueue
	Name                   Kind
	GiveUpAfter, Retention time.Duration
	// Sweep deletes at the provider, within tx, whatever of row id it may hold; an error is the
	// attempt's failure (retried).
	Sweep func(ctx context.Context, tx bun.IDB, id int64) error
	// GaveUp reports, within tx, that sweep sweepID of row id was given up after attempts with
	// lastErr.
	GaveUp func(ctx context.Context, tx bun.IDB, sweepID, id int64, attempts int, lastErr error) error
	// Text is the ErrorTexter of the sweeps' last_error.
	Text func(error) string
}

// Kind implements Provisioner.
func (s *Sweeper) Kind() Kind { return s.Name }

// Table implements Queue.
func (s *Sweeper) Table() string { return s.Sweeps }

// InFlight implements Queue.
func (s *Sweeper) InFlight() map[string]Verb { return map[string]Verb{Sweeping: VerbDelete} }

// Create is never called (no status maps to it).
func (s *Sweeper) Create(context.Context, CreateRequest) (CreateResponse, error) {
	return CreateResponse{}, errors.New("a sweep only deletes")
}

// Delete implements Provisioner: it runs Sweep for the sweep's row, then marks the sweep Swept.
func (s *Sweeper) Delete(ctx context.Context, req DeleteRequest) (DeleteResponse, error) {
	var ref int64
	if err := req.Tx.NewRaw("SELECT ? FROM ? WHERE id = ?", bun.Ident(s.Ref), bun.Ident(s.Sweeps), req.ResourceID).
		Scan(ctx, &ref); err != nil {
		return DeleteResponse{}, fmt.Errorf("load sweep %d of %s: %w", req.ResourceID, s.Sweeps, err)
	}
	if err := s.Sweep(ctx, req.Tx, ref); err != nil {
		return DeleteResponse{}, err
	}
	if _, err := req.Tx.NewRaw("UPDATE ? SET status = ?, last_error = '', updated_at = now() WHERE id = ?",
		bun.Ident(s.Sweeps), Swept, req.ResourceID).Exec(ctx); err != nil {
		return DeleteResponse{}, fmt.Errorf("record sweep %d of %s: %w", req.ResourceID, s.Sweeps, err)
	}
	return DeleteResponse{}, nil
}

// ErrorText implements ErrorTexter.
func (s *Sweeper) ErrorText(err error) string { return s.Text(err) }

// GiveUp implements GiveUpper; the Finisher calls it, in the attempt's transaction, after every
// failed attempt once Finisher:MaxAttempts have failed. It gives the sweep up (keeping the last
// error the Finisher has just recorded) only once the sweep is GiveUpAfter old, and then calls
// GaveUp once (the sweep is no longer in flight afterwards); a younger one stays Sweeping.
func (s *Sweeper) GiveUp(ctx context.Context, tx bun.IDB, id int64, lastErr error) error {
	var (
		ref      int64
		attempts int
	)
	err := tx.NewRaw("UPDATE ? SET status = ?, updated_at = now() WHERE id = ? AND status = ? AND created_at <= now() - ? * interval '1 second' "+
		"RETURNING ?, attempts", bun.Ident(s.Sweeps), SweepGaveUp, id, Sweeping, int64(s.GiveUpAfter/time.Second), bun.Ident(s.Ref)).
		Scan(ctx, &ref, &attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // not old enough yet (or no longer Sweeping): retried
	}
	if err != nil {
		return fmt.Errorf("give up sweep %d of %s: %w", id, s.Sweeps, err)
	}
	return s.GaveUp(ctx, tx, id, ref, attempts, lastErr)
}

// Prune implements Pruner: it deletes up to limit sweeps that ended (Swept or SweepGaveUp) more
// than Retention ago, oldest first, skipping rows another replica is deleting.
func (s *Sweeper) Prune(ctx context.Context, idb bun.IDB, limit int) (int, error) {
	t := bun.Ident(s.Sweeps)
	res, err := idb.NewRaw("DELETE FROM ? WHERE id IN (SELECT id FROM ? WHERE status IN (?) "+
		"AND updated_at < now() - ? * interval '1 second' ORDER BY updated_at LIMIT ? FOR UPDATE SKIP LOCKED)",
		t, t, bun.In([]string{Swept, SweepGaveUp}), int64(s.Retention/time.Second), limit).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune sweeps of %s: %w", s.Sweeps, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

var (
	_ Provisioner = (*Sweeper)(nil)
	_ Queue       = (*Sweeper)(nil)
	_ GiveUpper   = (*Sweeper)(nil)
	_ Pruner      = (*Sweeper)(nil)
	_ ErrorTexter = (*Sweeper)(nil)
)
