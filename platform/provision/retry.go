package provision

import (
	"context"

	"github.com/uptrace/bun"

	"provisioner/platform/db"
	"provisioner/platform/fault"
)

// Retrying describes an administrator's retry of a module's row (RetryNow).
type Retrying struct {
	// What names the row in a 409 ("record"); NotFound is the 404 of a missing one.
	What, NotFound string
	// Taken, when set, is the 409 of a row another live row's unique name keeps from going live.
	Taken string
	// Check, when set, may refuse the retry of the row found (a provider not configured).
	Check func() error
	// Room checks the quota of the row's owner within tx before a Failed row goes live again.
	Room func(ctx context.Context, tx bun.Tx, userID int64) error
}

// RetryNow is an administrator's retry of row id of T: found, checked, set going again (Spec.Retry
// within a transaction) and driven now (Run).
func RetryNow[T any, P interface {
	*T
	Stateful
}](ctx context.Context, f *Finisher, bdb *bun.DB, s Spec, id int64, r Retrying) (P, Outcome, error) {
	found, err := Find[T](ctx, bdb, id, r.NotFound)
	if err == nil && r.Check != nil {
		err = r.Check()
	}
	if err != nil {
		return nil, Outcome{}, err
	}
	st := P(found).Lifecycle()
	err = db.RunInTx(ctx, bdb, func(ctx context.Context, tx bun.Tx) error {
		err := s.Retry(ctx, tx, found, st.Status, r.What, func() error { return r.Room(ctx, tx, st.UserID) })
		if r.Taken != "" && db.IsUniqueViolation(err) {
			return fault.Conflict(r.Taken)
		}
		return err
	})
	if err != nil {
		return nil, Outcome{}, err
	}
	return Run[T, P](ctx, f, bdb, s, id, Again)
}
