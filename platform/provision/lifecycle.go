package provision

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/db"
	"provisioner/platform/fault"
)

// Retries is what the Finisher keeps of a row's attempts; embedded in State (and in a queue's row
// that has no status shown to users, such as a sweep).
type Retries struct {
	Attempts      int       `bun:"attempts,notnull"`
	NextAttemptAt time.Time `bun:"next_attempt_at,notnull"`
	LastError     string    `bun:"last_error,notnull"`
}

// State is the columns of a resource row the lifecycle reads and writes: its id (the Finisher's
// claim), its owner (quotas, lists, a deleted user's release), its status and errors, its attempts
// and its times. A module's Bun model embeds it; only the transitions below and the Finisher write
// status, errors, attempts and updated_at.
type State struct {
	ID           int64  `bun:"id,pk,autoincrement"`
	UserID       int64  `bun:"user_id,notnull"`
	Status       string `bun:"status,notnull"`
	ErrorMessage string `bun:"error_message,notnull"`
	Retries
	CreatedAt time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt time.Time `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
}

// Lifecycle returns the state itself: a model embedding State has it.
func (s *State) Lifecycle() *State { return s }

// Stateful is a model embedding State.
type Stateful interface{ Lifecycle() *State }

// RequestGrace is how long the Finisher leaves a row alone that a request stored (or set in
// flight again) and drives itself: it finishes the row only if that request dies first.
const RequestGrace = time.Minute

// Spec names a resource kind's table and its statuses: Creating → Active, or Failed (a refusal,
// or attempts run out); a live or Failed row → Deleting → Gone. A provisioner embeds its Spec,
// which implements Kind, Queue, GiveUpper and ErrorTexter. A status left "" is one the kind does
// not have.
type Spec struct {
	Name                                     Kind
	Rows                                     string
	Creating, Active, Failed, Deleting, Gone string
	// Between maps further in-between statuses to the verb that finishes them (a pause, a
	// resume): a request's drive that leaves a row in one is Pending, as in Creating or Deleting.
	Between map[string]Verb
	// Due maps statuses a request's drive may end in (Done) that the Finisher drives once their
	// next attempt is due (the end of a recovery window, of a grace period).
	Due map[string]Verb
	// Counted are the statuses RoomFor counts against a quota; nil: Live.
	Counted []string
	// Texts is what users read of a failed attempt (ErrorText); Target is the audit events'
	// targetType (Event).
	Texts  Texts
	Target string
}

// Kind implements Provisioner.
func (s Spec) Kind() Kind { return s.Name }

// Table implements Queue.
func (s Spec) Table() string { return s.Rows }

// InFlight implements Queue.
func (s Spec) InFlight() map[string]Verb {
	m := map[string]Verb{}
	if s.Creating != "" {
		m[s.Creating] = VerbCreate
	}
	if s.Deleting != "" {
		m[s.Deleting] = VerbDelete
	}
	maps.Copy(m, s.Due)
	maps.Copy(m, s.Between)
	return m
}

// pending tells whether status is in between: being made, deleted or changed.
func (s Spec) pending(status string) bool {
	_, between := s.Between[status]
	return status != "" && (between || status == s.Creating || status == s.Deleting)
}

// Live are the statuses of a row that holds its resource (and a place in its user's quota).
func (s Spec) Live() []string { return []string{s.Creating, s.Active, s.Deleting} }

// Intent is the state of userID's new row that a request drives itself.
func (s Spec) Intent(userID int64) State {
	return State{UserID: userID, Status: s.Creating, Retries: Retries{NextAttemptAt: time.Now().Add(RequestGrace)}}
}

// Shown is the error a row shows its user: its final error, or while in flight the last attempt's.
func (s Spec) Shown(st *State) string {
	if st.ErrorMessage == "" && s.pending(st.Status) {
		return st.LastError
	}
	return st.ErrorMessage
}

// The transitions. Each sets the columns of State on q (an update of the model's rows, its WHERE
// left to the caller) and updated_at; nothing else writes them.

// Restart puts rows in flight in status with a fresh count of attempts and no errors, due at at
// (now when zero).
func Restart(q *bun.UpdateQuery, status string, at time.Time) *bun.UpdateQuery {
	q = q.Set("status = ?", status).Set("attempts = 0").Set("error_message = ''").Set("last_error = ''").Set("updated_at = now()")
	if at.IsZero() {
		return q.Set("next_attempt_at = now()")
	}
	return q.Set("next_attempt_at = ?", at)
}

// Succeed records a verb's success: status (Active, Gone), errors cleared.
func Succeed(q *bun.UpdateQuery, status string) *bun.UpdateQuery {
	return q.Set("status = ?", status).Set("error_message = ''").Set("last_error = ''").Set("updated_at = now()")
}

// Fail ends rows in status (Failed) with msg, the error shown to their user.
func Fail(q *bun.UpdateQuery, status, msg string) *bun.UpdateQuery {
	return q.Set("status = ?", status).Set("error_message = ?", msg).Set("updated_at = now()")
}

// Move sets rows' status and nothing else of their state (a Failed row ended without a call).
func Move(q *bun.UpdateQuery, status string) *bun.UpdateQuery {
	return q.Set("status = ?", status).Set("updated_at = now()")
}

// Attempted records err as the last attempt's error (last_error, StoredError's length at most)
// on rows left in flight, or as why rows ended without a call.
func Attempted(q *bun.UpdateQuery, err error) *bun.UpdateQuery {
	return q.Set("last_error = ?", StoredError(err))
}

// Nudge makes rows in flight due now.
func Nudge(q *bun.UpdateQuery) *bun.UpdateQuery { return q.Set("next_attempt_at = now()") }

// Note records an attempt's error shown to the user without ending the row.
func Note(q *bun.UpdateQuery, msg string) *bun.UpdateQuery { return q.Set("error_message = ?", msg) }

// GiveUp implements GiveUpper: row id ends Failed with ErrorText(lastErr) if it is still Creating.
// Deletions are never given up, nor the rows of a kind without a Failed status.
func (s Spec) GiveUp(ctx context.Context, tx bun.IDB, id int64, lastErr error) error {
	_, err := s.GaveUp(ctx, tx, id, lastErr)
	return err
}

// GaveUp is GiveUp reporting whether it ended the row.
func (s Spec) GaveUp(ctx context.Context, tx bun.IDB, id int64, lastErr error) (bool, error) {
	if s.Failed == "" || s.Creating == "" {
		return false, nil
	}
	res, err := Fail(tx.NewUpdate().Table(s.Rows), s.Failed, s.ErrorText(lastErr)).
		Where("id = ?", id).Where("status = ?", s.Creating).Exec(ctx)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// Refused is a verb's answer to a request waiting for it (CreateRequest.Waiting) that the resource
// cannot be made as asked, e.g. the provider holds the name for another party. The verb has
// recorded the row's end (Failed, or deleted when the request stored it: CreateRequest.Fresh); Err
// is the client's answer (a conflict). The Finisher commits the row as the verb left it and the
// request gets Err as a Conflict outcome.
type Refused struct{ Err error }

func (e *Refused) Error() string { return e.Err.Error() }

// Unwrap returns the client's answer.
func (e *Refused) Unwrap() error { return e.Err }

// Result is how a request's drive of a row ended.
type Result int

const (
	// Done: the row reached Active, or Gone (not for a create: Stored).
	Done Result = iota + 1
	// Pending: the row is still in flight; the Finisher tries again at Outcome.RetryAt.
	Pending
	// Failed: the row ended Failed.
	Failed
	// Conflict: the verb refused (Refused); Outcome.Err is the answer.
	Conflict
)

// Outcome is what a request that drove a row learns: the result, when the next attempt is due
// (Pending) and the attempt's error (Pending; nil when the row was not due yet) or the refusal
// (Conflict).
type Outcome struct {
	Result  Result
	RetryAt time.Time
	Err     error
}

// How says how a request drives its row.
type How int

const (
	// Again drives a row stored earlier (a retry, a deletion).
	Again How = iota
	// Stored drives a row this very request stored to be made: a refusal may delete it
	// (CreateRequest.Fresh), and it is done only once Active.
	Stored
	// ReadOnly only reads the row: its next attempt is not due yet.
	ReadOnly
)

// Run is the request path's drive: it drives row id of spec's kind now (as the Finisher would),
// reads it back and returns it with the outcome. The row is nil only for a refusal that deleted it.
func Run[T any, P interface {
	*T
	Stateful
}](ctx context.Context, f *Finisher, db bun.IDB, spec Spec, id int64, how How) (P, Outcome, error) {
	var driveErr error
	if how != ReadOnly {
		driveErr = f.drive(ctx, spec.Name, id, how == Stored)
		if errors.Is(driveErr, ErrNotInFlight) { // finished by a Finisher elsewhere
			driveErr = nil
		}
	}
	var refused *Refused
	row := P(new(T))
	err := db.NewSelect().Model(row).Where("id = ?", id).Scan(context.WithoutCancel(ctx))
	switch {
	case errors.As(driveErr, &refused) && errors.Is(err, sql.ErrNoRows):
		return nil, Outcome{Result: Conflict, Err: refused.Err}, nil
	case err != nil:
		return nil, Outcome{}, fmt.Errorf("load %s %d: %w", spec.Name, id, err)
	case refused != nil:
		return row, Outcome{Result: Conflict, Err: refused.Err}, nil
	}
	st := row.Lifecycle()
	switch {
	case spec.pending(st.Status):
		return row, Outcome{Result: Pending, RetryAt: st.NextAttemptAt, Err: driveErr}, nil
	case st.Status == spec.Failed:
		return row, Outcome{Result: Failed, Err: driveErr}, nil
	}
	if how == Stored && st.Status != spec.Active { // deleted meanwhile: not made
		return row, Outcome{Result: Failed, Err: driveErr}, nil
	}
	return row, Outcome{Result: Done}, nil
}

// RoomFor locks user userID (a live one: db.UserGone otherwise) and checks, under that lock, that
// one more row of model's table in a Counted status stays within most: a conflict saying quota otherwise. Every
// path that makes a row live calls it (a create, the retry of a Failed row).
func (s Spec) RoomFor(ctx context.Context, tx bun.Tx, model any, userID int64, most int, quota string) error {
	if err := db.LockLiveUser(ctx, tx, userID); err != nil {
		return err
	}
	counted := s.Counted
	if counted == nil {
		counted = s.Live()
	}
	n, err := tx.NewSelect().Model(model).Where("user_id = ?", userID).Where("status IN (?)", bun.In(counted)).Count(ctx)
	if err != nil {
		return fmt.Errorf("count %s of user %d: %w", s.Rows, userID, err)
	}
	if n >= int64(most) {
		return fault.Conflict(quota)
	}
	return nil
}

// Release puts a deleted user's rows of model's table in the statuses from into Deleting (within
// tx, the deletion's transaction), plus set on the update, and returns their ids; the Finisher
// then deletes them at the provider.
func (s Spec) Release(ctx context.Context, tx bun.IDB, model any, userID int64, from []string, set ...func(*bun.UpdateQuery) *bun.UpdateQuery) ([]int64, error) {
	q := Restart(tx.NewUpdate().Model(model), s.Deleting, time.Time{}).Where("user_id = ?", userID).Where("status IN (?)", bun.In(from))
	for _, f := range set {
		q = f(q)
	}
	var ids []int64
	if err := q.Returning("id").Scan(ctx, &ids); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("release %s of user %d: %w", s.Rows, userID, err)
	}
	return ids, nil
}

// Retry is an administrator's retry of row (a pointer to a model of the table, its status
// status), within tx: a Failed row goes back to Creating once room (its quota check) allows, a
// Creating or Deleting one is due at once; the caller then drives it (Run, Again). A 409 names
// what the row is ("record") when it is in another status or changed meanwhile; Restart's own
// error (a unique violation: another live row holds its name) is returned as it is.
func (s Spec) Retry(ctx context.Context, tx bun.IDB, row any, status, what string, room func() error) error {
	switch status {
	case s.Failed:
		if err := room(); err != nil {
			return err
		}
		res, err := Restart(tx.NewUpdate().Model(row), s.Creating, time.Time{}).WherePK().Where("status = ?", s.Failed).Exec(ctx)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fault.Conflict(fmt.Sprintf("The %s changed meanwhile; reload it", what))
		}
		return nil
	case s.Creating, s.Deleting:
		_, err := Nudge(tx.NewUpdate().Model(row)).WherePK().Exec(ctx)
		return err
	}
	return fault.Conflict(fmt.Sprintf("Nothing to retry: the %s is %s", what, status))
}
