package queues

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"provisioner/platform/provision"
)

// SweepKind is the finisher's name for removing from the broker what a Failed space's attempts
// may have left there.
const SweepKind provision.Kind = "queues-sweep"

// queueSweep stores, in tx, the intent to remove space id from the broker.
func queueSweep(ctx context.Context, tx bun.IDB, id int64) error {
	if _, err := tx.ExecContext(ctx, "INSERT INTO queue_space_sweeps (space_id) VALUES (?)", id); err != nil {
		return fmt.Errorf("queue the sweep of queue space %d: %w", id, err)
	}
	return nil
}

// Sweeper removes from the broker the virtual host and user of a space that ended Failed. A space
// provisioned again meanwhile (an administrator's retry) is left alone. Sweeps are retried at the
// finisher's capped backoff until the broker answers, never given up.
type Sweeper struct{ p *Provisioner }

// Kind implements provision.Provisioner.
func (w *Sweeper) Kind() provision.Kind { return SweepKind }

// Table implements provision.Queue.
func (w *Sweeper) Table() string { return "queue_space_sweeps" }

// InFlight implements provision.Queue.
func (w *Sweeper) InFlight() map[string]provision.Verb {
	return map[string]provision.Verb{"Pending": provision.VerbCreate}
}

// Create implements provision.Provisioner: the sweep's space is read under its lock (a request
// or the finisher driving it is waited for), removed from the broker unless it is live again,
// and the sweep is done (deleted).
func (w *Sweeper) Create(ctx context.Context, req provision.CreateRequest) (provision.CreateResponse, error) {
	var spaceID int64
	if err := req.Tx.QueryRowContext(ctx, "SELECT space_id FROM queue_space_sweeps WHERE id = ?", req.ResourceID).Scan(&spaceID); err != nil {
		return provision.CreateResponse{}, fmt.Errorf("load sweep %d: %w", req.ResourceID, err)
	}
	s := new(Space)
	err := req.Tx.NewSelect().Model(s).Where("id = ?", spaceID).For("UPDATE").Scan(ctx)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return provision.CreateResponse{}, fmt.Errorf("lock queue space %d: %w", spaceID, err)
	case s.Status == StatusFailed || s.Status == StatusDeleted:
		if err := w.p.remove(ctx, s); err != nil {
			return provision.CreateResponse{}, err
		}
	}
	if _, err := req.Tx.ExecContext(ctx, "DELETE FROM queue_space_sweeps WHERE id = ?", req.ResourceID); err != nil {
		return provision.CreateResponse{}, fmt.Errorf("end sweep %d: %w", req.ResourceID, err)
	}
	return provision.CreateResponse{}, nil
}

// Delete implements provision.Provisioner; a sweep is never deleted through the finisher.
func (w *Sweeper) Delete(context.Context, provision.DeleteRequest) (provision.DeleteResponse, error) {
	return provision.DeleteResponse{}, nil
}

// ErrorText implements provision.ErrorTexter.
func (w *Sweeper) ErrorText(err error) string { return spec.ErrorText(err) }

var (
	_ provision.Provisioner = (*Sweeper)(nil)
	_ provision.Queue       = (*Sweeper)(nil)
	_ provision.ErrorTexter = (*Sweeper)(nil)
)
