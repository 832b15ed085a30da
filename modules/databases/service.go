package databases

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/coherent"
	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/paging"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// Kind is the provisioner kind of tenant databases.
const Kind provision.Kind = "database"

// Service manages tenant databases: intent in the control database first, then the engine.
type Service struct {
	db       *bun.DB
	cfg      Config
	engines  *Engines
	sealer   *secrets.Sealer
	audit    *audit.Recorder
	finisher *provision.Finisher
	log      *slog.Logger
	// mine caches each user's own list, kept coherent with database_instances on every replica.
	mine *coherent.Cache[int64, string]
	// waits bounds the requests that wait for an engine holding a control database connection.
	waits engineWaits
}

// item turns a stored instance into its API view.
func (s *Service) item(in *Instance) Item {
	it := Item{DatabaseInstanceID: in.ID, Name: in.Name, Engine: in.Engine, DatabaseName: in.DatabaseName,
		DatabaseUser: in.Login(), Status: in.Status, RotationDays: in.RotationDays, UsedSpaceBytes: in.UsedSpaceBytes,
		MaxSpaceBytes: in.MaxSpaceBytes, ReadOnly: in.ReadOnly, ReadOnlyReason: in.ReadOnlyReason,
		LastActivity: in.LastActivity, CreatedAt: in.CreatedAt.UTC(), UserID: in.UserID}
	if e := s.engines.Get(in.Engine); e != nil {
		it.Host, it.Port = e.Host(), e.Port()
	}
	it.ErrorMessage = spec.Shown(&in.State)
	if it.LastActivity != nil {
		t := it.LastActivity.UTC()
		it.LastActivity = &t
	}
	recoveryView(&it, in)
	return it
}

// NewName is u<userId>_<12 lowercase alphanumerics>: generated, never from user text. It must be
// unique on the engine, which other deployments may share (their users numbered alike): a create
// adopts a database of its name that exists there. The 12 random characters (about 62 bits) keep
// the odds of two deployments' same user drawing one name below one in 10^10 over 10^8 pairs.
func NewName(userID int64) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return fmt.Sprintf("u%d_%s", userID, b)
}

// CreateInput asks for a new database.
type CreateInput struct {
	UserID int64
	Engine string
	Name   string
	// SkipQuota is set for administrators creating on a user's behalf.
	SkipQuota bool
	// RotationDays > 0 rotates the password on that schedule.
	RotationDays int
	// Background is set by the registration: when no engine-wait slot frees in time, the intent
	// is stored all the same and left to the finisher (the row answers Provisioning) instead of 503.
	Background bool
}

// Create stores the intent (Provisioning) and drives it once; the finisher completes it later
// if the engine is slow or down. It returns the row as it then stands and the outcome. When no
// engine-wait slot frees in time it stores nothing and is 503 (a Background create stores the
// intent and leaves the drive to the finisher: the outcome is Pending).
func (s *Service) Create(ctx context.Context, in CreateInput) (*Instance, provision.Outcome, error) {
	engineID := strings.ToLower(in.Engine)
	if engineID == "" {
		engineID = s.engines.Default()
	}
	engine := s.engines.Get(engineID)
	if engine == nil {
		return nil, provision.Outcome{}, fault.InvalidField("engine", fmt.Sprintf("engine %q is not configured here; see GET /api/engines", in.Engine))
	}
	release, ok := s.waits.await(ctx)
	if !ok && !in.Background {
		return nil, provision.Outcome{}, engineBusy()
	}
	how := provision.ReadOnly
	if ok {
		defer release()
		how = provision.Stored
	}
	name := NewName(in.UserID)
	sealed, err := s.sealer.Seal([]byte(secrets.RandomPassword()), passwordAAD(engine.ID(), name))
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	display := strings.TrimSpace(in.Name)
	if display == "" {
		display = name
	}
	inst := &Instance{Name: display, Engine: engine.ID(), DatabaseName: name, DatabaseUser: name, PasswordSealed: sealed,
		MaxSpaceBytes: s.cfg.Databases.DefaultMaxSpaceBytes, RotationDays: in.RotationDays, State: spec.Intent(in.UserID)}
	inst.NextAttemptAt = time.Now() // the finisher's at once: a registration's drive may be cut short
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		// The owner's row lock serialises concurrent creates, so the quota cannot be overrun.
		if err := s.roomFor(ctx, tx, in.UserID, in.SkipQuota); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(inst).Returning("?Columns").Exec(ctx); err != nil {
			return fmt.Errorf("store database intent: %w", err)
		}
		return reschedule(ctx, tx, inst.ID, inst.RotationDays)
	})
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	return provision.Run[Instance](ctx, s.finisher, s.db, spec, inst.ID, how)
}

// roomFor locks live user userID and checks Databases:MaxPerUser for one more database of theirs
// (none for an administrator's create: skip).
func (s *Service) roomFor(ctx context.Context, tx bun.Tx, userID int64, skip bool) error {
	if skip {
		return db.LockLiveUser(ctx, tx, userID)
	}
	return spec.RoomFor(ctx, tx, (*Instance)(nil), userID, s.cfg.Databases.MaxPerUser,
		fmt.Sprintf("Quota reached: at most %d databases per user", s.cfg.Databases.MaxPerUser))
}

// msgNotFound is the 404 of a database.
const msgNotFound = "Database not found"

// get loads a non-deleted instance; userID 0 means any owner (administrators).
func (s *Service) get(ctx context.Context, id, userID int64) (*Instance, error) {
	inst, err := provision.Find[Instance](ctx, s.db, id, msgNotFound)
	if err == nil && (inst.Status == StatusDeleted || (userID != 0 && inst.UserID != userID)) {
		return nil, fault.NotFound(msgNotFound)
	}
	return inst, err
}

// ListMine is List for the user's own requests, served from a cache that every change to one of
// their rows drops on every replica (the list is the hot path of the SPA). The cache holds each
// list packed (itemcodec.go); every call returns a list of its own.
func (s *Service) ListMine(ctx context.Context, userID int64) ([]Item, error) {
	packed, err := s.mine.Get(ctx, userID, func(ctx context.Context) (string, error) {
		items, err := s.List(ctx, userID)
		if err != nil {
			return "", err
		}
		return packItems(items), nil
	})
	if err != nil {
		return nil, err
	}
	return unpackItems(packed), nil
}

// List returns the user's databases (deleted ones are not listed).
func (s *Service) List(ctx context.Context, userID int64) ([]Item, error) {
	return provision.List(ctx, s.db, userID, []string{StatusDeleted}, s.item)
}

// SetPaused pauses (the logins of the database's role and of its access credentials are
// refused and their sessions end) or resumes a database. The intent (Pausing, Resuming) is stored
// first and then driven through the finisher, which finishes it in the background when the
// engine fails or the process dies meanwhile; asking again drives an unfinished one again. It
// returns the row as it then stands and the outcome.
func (s *Service) SetPaused(ctx context.Context, id, userID int64, pause bool) (*Instance, provision.Outcome, error) {
	from, via, action, only := StatusActive, StatusPausing, "database.paused", "an Active database can be paused"
	if !pause {
		from, via, action, only = StatusPaused, StatusResuming, "database.resumed", "a Paused database can be resumed"
	}
	return s.change(ctx, id, userID, func(ctx context.Context, tx bun.Tx, inst *Instance) error {
		if inst.Status == via {
			return nil // unfinished: driven again
		}
		if inst.Status != from {
			return fault.Conflict(fmt.Sprintf("Database is %s; only %s", apiStatus(inst.Status), only))
		}
		if _, err := provision.Restart(tx.NewUpdate().Model(inst), via, time.Time{}).WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("mark database %d %s: %w", id, strings.ToLower(via), err)
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: action, UserID: audit.Int64(inst.UserID),
			TargetType: "database", TargetID: fmt.Sprint(id)})
	})
}

// change runs a request's change of database id (of userID; 0: any owner): it takes an
// engine-wait slot, stores the intent through step in a transaction holding the row's lock (lock),
// then drives it through the finisher. It returns the row as it then stands and the outcome.
func (s *Service) change(ctx context.Context, id, userID int64, step func(ctx context.Context, tx bun.Tx, inst *Instance) error) (*Instance, provision.Outcome, error) {
	release, err := s.waits.acquire(ctx)
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	defer release()
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		inst, err := s.lock(ctx, tx, id, userID)
		if err != nil {
			return err
		}
		return step(ctx, tx, inst)
	})
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	return provision.Run[Instance](ctx, s.finisher, s.db, spec, id, provision.Again)
}

// lock locks database id (of userID; 0: any owner; a Deleted one is not found) for a change by
// this request, without waiting (provision.LockNow: 409 while another request or the finisher
// holds it).
func (s *Service) lock(ctx context.Context, tx bun.Tx, id, userID int64) (*Instance, error) {
	return provision.LockNow[Instance](ctx, tx, id, userID, "UPDATE", msgNotFound, errDatabaseBusy, StatusDeleted)
}

// deleteLease is how long the request that stores a delete's intent (Deleting) keeps the row to
// itself: its next_attempt_at is that far ahead, so the background finisher leaves it to the
// request's own drive, and another DELETE meanwhile is told it is in progress. A drive that fails
// records its attempt (attempts 1 and more, next_attempt_at at the backoff); one the request
// never made (the process died) is the finisher's once the lease is over.
const deleteLease = time.Minute

// deleteInProgress answers a DELETE of a row already Deleting and locked by this transaction (its
// retries r): 409 busy while the request that stored the intent is still under way (no attempt
// recorded, its lease not over), so parallel DELETEs give one 200 and 409s; nil otherwise (an
// attempt failed, 502, or the intent was stored by something else), and the caller drives the
// delete again.
func deleteInProgress(r provision.Retries, busy string) error {
	if r.Attempts == 0 && r.NextAttemptAt.After(time.Now()) {
		return fault.Conflict(busy)
	}
	return nil
}

// errDatabaseBusy is the 409 of a request on a database another request or the finisher is
// changing.
const errDatabaseBusy = "The database is being changed; try again"

// Delete marks the database Deleting and drives it: within Databases:RecoveryHours its logins are
// refused and it is kept (Recoverable) until purge_at, else (or with purge) it is dropped; the
// finisher retries if the engine fails. It returns the row as it then stands and the outcome.
func (s *Service) Delete(ctx context.Context, id, userID int64, purge bool) (*Instance, provision.Outcome, error) {
	return s.change(ctx, id, userID, func(ctx context.Context, tx bun.Tx, inst *Instance) error {
		if inst.Status == StatusDeleting {
			if err := deleteInProgress(inst.Retries, errDatabaseBusy); err != nil {
				return err
			}
			return s.purgeDeleting(ctx, tx, inst, purge)
		}
		purgeAt, ev, err := s.deleteIntent(inst, purge)
		if err != nil {
			return err
		}
		if _, err := provision.Restart(tx.NewUpdate().Model(inst), StatusDeleting, time.Now().Add(deleteLease)).Set("purge_at = ?", purgeAt).
			WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("mark database %d deleting: %w", id, err)
		}
		return s.audit.RecordTx(ctx, tx, ev)
	})
}

// Reveal returns the password of an own database and audits it.
func (s *Service) Reveal(ctx context.Context, id, userID int64) (*Reveal, error) {
	inst, err := s.get(ctx, id, userID)
	if err != nil {
		return nil, err
	}
	switch inst.Status {
	case StatusProvisioning, StatusFailed, StatusDeleting, StatusRecoverable, StatusRestoring:
		return nil, fault.Conflict(fmt.Sprintf("Database is %s; its password is available once it is Active", apiStatus(inst.Status)))
	}
	// The new password of a rotation not yet made on the engine would not log in: none is shown
	// until it is (the old one no longer is the stored one).
	if next, pending, err := pendingRotation(ctx, s.db, id); err != nil {
		return nil, err
	} else if pending {
		return nil, fault.Conflict(errPasswordRotating).WithRetryAfter(max(time.Until(next), time.Second))
	}
	pw, err := s.sealer.Open(inst.PasswordSealed, passwordAAD(inst.Engine, inst.DatabaseName))
	if err != nil {
		return nil, fmt.Errorf("open database password %d: %w", id, err)
	}
	if err := s.audit.Record(ctx, audit.Event{Action: "database.password.revealed", UserID: audit.Int64(inst.UserID),
		TargetType: "database", TargetID: fmt.Sprint(id)}); err != nil {
		return nil, err // no reveal without its audit record
	}
	r := &Reveal{DatabaseUser: inst.Login(), Password: string(pw)}
	if e := s.engines.Get(inst.Engine); e != nil {
		r.ConnectionString = e.ConnectionString(inst.DatabaseName, inst.Login(), string(pw))
	}
	return r, nil
}

// errPasswordRotating is the 409 of a reveal while the database's new password is being set on
// its engine.
const errPasswordRotating = "The database's password is being changed on its engine; reveal it again after Retry-After seconds"

// Update changes an instance's display name, quota or rotation schedule (administrators; a new
// schedule counts from now).
func (s *Service) Update(ctx context.Context, id int64, name *string, maxSpace *int64, rotationDays *int) (*Instance, error) {
	if name != nil && strings.TrimSpace(*name) == "" {
		return nil, fault.InvalidField("name", "must not be blank")
	}
	var out *Instance
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		inst, err := s.lock(ctx, tx, id, 0)
		if err != nil {
			return err
		}
		// Only what changes is written and recorded, the name as stored (trimmed); a change that
		// leaves the database as it is writes nothing, as a user's no-op update does.
		details := map[string]any{}
		if name != nil && strings.TrimSpace(*name) != inst.Name {
			details["name"] = map[string]any{"from": inst.Name, "to": strings.TrimSpace(*name)}
			inst.Name = strings.TrimSpace(*name)
		}
		if maxSpace != nil && *maxSpace != inst.MaxSpaceBytes {
			details["maxSpaceBytes"] = map[string]any{"from": inst.MaxSpaceBytes, "to": *maxSpace}
			inst.MaxSpaceBytes = *maxSpace
		}
		if rotationDays != nil && *rotationDays != inst.RotationDays {
			details["rotationDays"] = map[string]any{"from": inst.RotationDays, "to": *rotationDays}
			inst.RotationDays = *rotationDays
			if err := reschedule(ctx, tx, id, inst.RotationDays); err != nil {
				return err
			}
		}
		out = inst
		if len(details) == 0 {
			return nil
		}
		if _, err := tx.NewUpdate().Model(inst).Column("name", "max_space_bytes", "rotation_days").Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("update database %d: %w", id, err)
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "database.updated", UserID: audit.Int64(inst.UserID),
			TargetType: "database", TargetID: fmt.Sprint(id), Details: details})
	})
	return out, err
}

// AdminFilter narrows the administrators' list.
type AdminFilter struct {
	UserID         int64
	Status, Engine string
	// Recoverable lists only deleted databases still in their recovery window.
	Recoverable bool
	paging.PageQuery
}

// AdminList pages through every database (dropped ones only when asked by status).
func (s *Service) AdminList(ctx context.Context, f AdminFilter) (paging.Page[Item], error) {
	var rows []Instance
	q := s.db.NewSelect().Model(&rows)
	if f.UserID > 0 {
		q = q.Where("user_id = ?", f.UserID)
	}
	switch {
	case f.Recoverable:
		q = q.Where("status = ?", StatusRecoverable)
	case f.Status == StatusDeleted:
		q = q.Where("status IN (?)", bun.In([]string{StatusDeleted, StatusRecoverable}))
	case f.Status != "":
		q = q.Where("status = ?", f.Status)
	default: // those in their recovery window too: they are still on their engines
		q = q.Where("status <> ?", StatusDeleted)
	}
	if f.Engine != "" {
		q = q.Where("engine = ?", strings.ToLower(f.Engine))
	}
	return db.ListPage(ctx, q, &rows, f.PageQuery, s.item)
}
