package provision

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/db"
	"provisioner/platform/fault"
)

// Deleting describes a user's deletion of a module's row of T (DeleteNow).
type Deleting[T any] struct {
	// NotFound is the 404 of a missing row, or of another user's.
	NotFound string
	// Gone, when set, is the 409 of a row already Gone; unset, a Gone row is not found.
	Gone string
	// Check, when set, may refuse the deletion of the row found (a provider not configured); it
	// runs after the lookup, so another user's row is a 404 all the same.
	Check func() error
	// Start, when set, sets the row going to Deleting within tx (instead of Restart), or ends it
	// at once.
	Start func(ctx context.Context, tx bun.Tx, row *T) error
	// Audit records, within tx, the deletion of a row that was not Deleting yet.
	Audit func(ctx context.Context, tx bun.Tx, row *T) error
}

// DeleteNow is a user's deletion of row id of T (userID's own; 0: an administrator's): locked,
// checked, set Deleting (a live or Failed row) and driven now (Run). A row already Deleting is
// driven again only once its next attempt is due: before that it is returned as it stands.
func DeleteNow[T any, P interface {
	*T
	Stateful
}](ctx context.Context, f *Finisher, bdb *bun.DB, s Spec, id, userID int64, d Deleting[T]) (P, Outcome, error) {
	how := Again
	err := db.RunInTx(ctx, bdb, func(ctx context.Context, tx bun.Tx) error {
		var hidden []string
		if d.Gone == "" {
			hidden = []string{s.Gone}
		}
		row, err := Lock[T](ctx, tx, id, userID, d.NotFound, hidden...)
		if err != nil {
			return err
		}
		if d.Check != nil {
			if err := d.Check(); err != nil {
				return err
			}
		}
		st := P(row).Lifecycle()
		switch st.Status {
		case s.Gone:
			return fault.Conflict(d.Gone)
		case s.Deleting:
			if st.NextAttemptAt.After(time.Now()) {
				how = ReadOnly
			}
			return nil
		}
		if d.Start != nil {
			err = d.Start(ctx, tx, row)
		} else if _, err = Restart(tx.NewUpdate().Model(row), s.Deleting, time.Time{}).WherePK().Exec(ctx); err != nil {
			err = fmt.Errorf("mark %s %d deleting: %w", s.Name, id, err)
		}
		if err != nil {
			return err
		}
		return d.Audit(ctx, tx, row)
	})
	if err != nil {
		return nil, Outcome{}, err
	}
	return Run[T, P](ctx, f, bdb, s, id, how)
}
