package provision

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/paging"
)

// Load reads row id of T through tx (a verb's read of its row, under the row's lock).
func Load[T any](ctx context.Context, tx bun.IDB, id int64) (*T, error) {
	row := new(T)
	if err := tx.NewSelect().Model(row).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, fmt.Errorf("load %T %d: %w", row, id, err)
	}
	return row, nil
}

// Find reads row id of T; a missing one is a not-found error saying notFound.
func Find[T any](ctx context.Context, idb bun.IDB, id int64, notFound string) (*T, error) {
	row, err := Load[T](ctx, idb, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fault.NotFound(notFound)
	}
	return row, err
}

// Lock reads and locks (FOR UPDATE, within tx) row id of T: userID's own unless userID is 0 (an
// administrator), and not in the statuses hidden; a missing one is a not-found error saying
// notFound.
func Lock[T any](ctx context.Context, tx bun.IDB, id, userID int64, notFound string, hidden ...string) (*T, error) {
	return lockRow[T](ctx, tx, id, userID, "UPDATE", notFound, "", hidden)
}

// LockNow is Lock without waiting for another transaction's lock: FOR mode ("UPDATE", "SHARE")
// NOWAIT, so a row another request or the finisher holds (while it asks a provider, which may
// take long) is at once a conflict saying busy (Busy when ""), not a request that waits until its
// deadline.
func LockNow[T any](ctx context.Context, tx bun.IDB, id, userID int64, mode, notFound, busy string, hidden ...string) (*T, error) {
	return lockRow[T](ctx, tx, id, userID, mode+" NOWAIT", notFound, cmp.Or(busy, Busy), hidden)
}

// Busy is LockNow's conflict when its caller names no text of its own.
const Busy = "Another change of this resource is in progress; try again shortly"

func lockRow[T any](ctx context.Context, tx bun.IDB, id, userID int64, mode, notFound, busy string, hidden []string) (*T, error) {
	row := new(T)
	q := tx.NewSelect().Model(row).Where("id = ?", id).For(mode)
	if userID != 0 {
		q = q.Where("user_id = ?", userID)
	}
	if len(hidden) > 0 {
		q = q.Where("status NOT IN (?)", bun.In(hidden))
	}
	err := q.Scan(ctx)
	switch {
	case err == nil:
		return row, nil
	case errors.Is(err, sql.ErrNoRows):
		return nil, fault.NotFound(notFound)
	case busy != "" && db.IsCode(err, "55P03"): // lock_not_available
		return nil, fault.Conflict(busy)
	}
	return nil, fmt.Errorf("lock %T %d: %w", row, id, err)
}

// List returns userID's rows of T, oldest first, but those in the statuses hidden, as views.
func List[T, V any](ctx context.Context, idb bun.IDB, userID int64, hidden []string, view func(*T) V) ([]V, error) {
	var rows []T
	q := idb.NewSelect().Model(&rows).Where("user_id = ?", userID)
	if len(hidden) > 0 {
		q = q.Where("status NOT IN (?)", bun.In(hidden))
	}
	if err := q.OrderExpr("id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list %T of user %d: %w", rows, userID, err)
	}
	out := make([]V, len(rows))
	for i := range rows {
		out[i] = view(&rows[i])
	}
	return out, nil
}

// AdminFilter is the query of the administrators' list of a resource: a page, and an owner (0:
// everyone's). A module's input embeds it beside its status filter, which names its own statuses.
type AdminFilter struct {
	paging.PageQuery
	UserID int64 `query:"userId" minimum:"0"`
}

// AdminList pages through every row of T matching f and status ("": any), newest first, as views.
func AdminList[T, V any](ctx context.Context, idb bun.IDB, f AdminFilter, status string, view func(*T) V) (paging.Page[V], error) {
	var rows []T
	q := idb.NewSelect().Model(&rows)
	if f.UserID > 0 {
		q = q.Where("user_id = ?", f.UserID)
	}
	if status != "" {
		q = q.Where("status = ?", status)
	}
	return db.ListPage(ctx, q, &rows, f.PageQuery, view)
}
