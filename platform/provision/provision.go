// Package provision defines how resource modules plug into the platform: the Provisioner that
// creates and deletes one kind of external resource, optional capabilities found by type assertion,
// and the Finisher that drives rows left in an in-between state (a crash, a timeout, a provider
// outage) to their end. The modules' state rows are the outbox: every change to an external system
// is persisted as intent first, then made, then recorded.
package provision

import (
	"context"
	"errors"
	"time"

	"github.com/uptrace/bun"
	"go.uber.org/fx"
)

// Kind names one kind of resource ("database", "dns", "wfauto").
type Kind string

// CreateRequest asks a Provisioner to make the external resource of one stored row.
type CreateRequest struct {
	// ResourceID is our id of the row holding the intent; the provisioner reads what to create from it.
	ResourceID int64
	// Attempt counts previous attempts (0 on the first).
	Attempt int
	// Tx is the transaction that holds the row's lock: the provisioner reads and records the
	// outcome through it, never through another connection (that would wait on the lock).
	Tx bun.IDB
	// Waiting: a request waits for this attempt's outcome (Run); a refusal may then be returned
	// as Refused instead of being recorded only in the row.
	Waiting bool
	// Fresh: that request stored the row itself; a refusal may delete the row.
	Fresh bool
}

// CreateResponse reports what was created.
type CreateResponse struct {
	// ExternalID is the provider's id (a record id, an account id, a role name).
	ExternalID string
}

// DeleteRequest asks a Provisioner to remove the external resource of one stored row.
type DeleteRequest struct {
	ResourceID int64
	Attempt    int
	Tx         bun.IDB
}

// DeleteResponse reports a deletion.
type DeleteResponse struct{}

// Provisioner creates and removes one kind of external resource; safe for concurrent use. Both
// verbs record their outcome in the row through req.Tx and return nil once the row is final
// (success or final failure); an error means "retry later" (counted, backed off). The Finisher takes
// a savepoint before each call, so a failed statement of the attempt undoes only the attempt.
type Provisioner interface {
	// Kind names the resource; no side effects.
	Kind() Kind
	// Create makes the resource. Idempotent on req.ResourceID: a second call (after a crash between
	// the call and the recorded outcome) finds the resource and adopts it, never creates it twice.
	Create(ctx context.Context, req CreateRequest) (CreateResponse, error)
	// Delete removes the resource. Must not fail if it is already gone.
	Delete(ctx context.Context, req DeleteRequest) (DeleteResponse, error)
}

// Verb is what the Finisher does to a row in an in-between status.
type Verb int

const (
	// VerbCreate calls Provisioner.Create.
	VerbCreate Verb = iota + 1
	// VerbDelete calls Provisioner.Delete.
	VerbDelete
	// VerbSuspend calls Suspender.Suspend (the provisioner must implement Suspender).
	VerbSuspend
	// VerbResume calls Suspender.Resume.
	VerbResume
)

// Queue is implemented by provisioners whose rows the Finisher drives.
type Queue interface {
	// Table is the state table. It has the columns id (bigint), status (text), attempts (int),
	// next_attempt_at (timestamptz) and last_error (text), and an index on (next_attempt_at)
	// WHERE status is in-between.
	Table() string
	// InFlight maps each in-between status to the verb that finishes it, e.g.
	// {"Pending": VerbCreate, "Revoking": VerbDelete}.
	InFlight() map[string]Verb
}

// GiveUpper is implemented by provisioners that end a row when its attempts run out (e.g. mark it
// Failed). Without it the Finisher keeps retrying at the capped backoff.
type GiveUpper interface {
	GiveUp(ctx context.Context, tx bun.IDB, resourceID int64, lastErr error) error
}

// ErrorTexter is implemented by provisioners whose rows' last_error is shown to users (an
// errorMessage): the Finisher stores ErrorText(err) as a failed attempt's last_error instead of
// err's own text, so an error that is not the provider's (our database's, with its SQL and
// SQLSTATE) is stored as a generic text. The whole error is still logged, and passed to GiveUp.
type ErrorTexter interface {
	ErrorText(err error) string
}

// Pruner is implemented by queues that keep rows in a final state only for a while (the DNS
// module's finished leftover sweeps). The Finisher calls Prune from its polls every
// FinisherOptions.PruneInterval, and again at the next poll while a call deletes a full batch;
// Prune deletes at most limit such rows, in one statement, and returns how many it deleted.
type Pruner interface {
	Prune(ctx context.Context, db bun.IDB, limit int) (int, error)
}

// SuspendRequest and ResumeRequest name the row of a resource to pause or resume.
type SuspendRequest struct {
	ResourceID int64
	Tx         bun.IDB
}

// ResumeRequest names the row of a resource to resume.
type ResumeRequest struct {
	ResourceID int64
	Tx         bun.IDB
}

// Suspender is implemented by resources that can be paused (databases).
type Suspender interface {
	Suspend(ctx context.Context, req SuspendRequest) error
	Resume(ctx context.Context, req ResumeRequest) error
}

// RetryAfterer is implemented by provider errors that say when to try again (an HTTP 429 or 503
// with Retry-After). The Finisher schedules the next attempt no sooner than that, capped by
// FinisherOptions.MaxRetryAfter (default a day).
type RetryAfterer interface {
	RetryAfter() time.Duration
}

// RetryAfterOf returns the wait asked for by the first error in err's chain implementing
// RetryAfterer, when it is positive.
func RetryAfterOf(err error) (time.Duration, bool) {
	var ra RetryAfterer
	if !errors.As(err, &ra) {
		return 0, false
	}
	d := ra.RetryAfter()
	if d <= 0 {
		return 0, false
	}
	return d, true
}

// Deferred is the error of a call that was not made but only put off, such as one our own
// outbound budget refused: not a failed attempt. The Finisher does not count it against
// MaxAttempts (nor gives the row up for it) and schedules the next attempt at At.
type Deferred struct {
	At  time.Time
	Err error
}

func (e *Deferred) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *Deferred) Unwrap() error { return e.Err }

// DeferredUntil returns when the first Deferred in err's chain may be tried again (never sooner
// than a second from now), and whether there is one.
func DeferredUntil(err error) (time.Time, bool) {
	var d *Deferred
	if !errors.As(err, &d) {
		return time.Time{}, false
	}
	return maxTime(d.At, time.Now().Add(time.Second)), true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// AsProvisioner provides a module's Provisioner to the platform.
func AsProvisioner(f any) any {
	return fx.Annotate(f, fx.As(new(Provisioner)), fx.ResultTags(`group:"provisioners"`))
}

// ErrNotInFlight means the row is not (or no longer) in an in-between state.
var ErrNotInFlight = errors.New("resource is not in an in-between state")
