package databases

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/fault"
	"provisioner/platform/provision"
)

// maxRecoveryHours bounds Databases:RecoveryHours (a year).
const maxRecoveryHours = 8760

// recoveryWindow is Databases:RecoveryHours.
func recoveryWindow(cfg Config) time.Duration {
	return time.Duration(cfg.Databases.RecoveryHours) * time.Hour
}

// ownerLogins refuses or allows the logins inst's owner logs in with: its owner role and, once a
// rotation made it, its second login (rotate.go). Refusing ends their sessions (on PostgreSQL the
// database is closed to every other role too): pause and a recoverable delete. Allowing (resume,
// restore) opens the current login (Login) and the other one only while a rotation's grace keeps
// it (graceKeeps); otherwise the other is retired, so a login whose grace ended (or whose retiring
// was skipped) while the database was closed never logs in again with its old password.
func ownerLogins(ctx context.Context, tx bun.IDB, engine Engine, inst *Instance, enabled bool) error {
	if !enabled {
		if err := setSecondLogin(ctx, engine, inst, false); err != nil {
			return err
		}
		return engine.CloseLogins(ctx, inst.DatabaseName, []string{inst.DatabaseUser})
	}
	keep, err := graceKeeps(ctx, tx, inst)
	if err != nil {
		return err
	}
	if !keep {
		if err := retireLogin(ctx, engine, inst, inst.otherLogin()); err != nil {
			return err
		}
	}
	current := inst.Login() == inst.DatabaseUser
	if current || keep {
		if err := engine.OpenLogins(ctx, inst.DatabaseName, []string{inst.DatabaseUser}); err != nil {
			return err
		}
	}
	if !current || keep {
		return setSecondLogin(ctx, engine, inst, true)
	}
	return nil
}

// apiStatus is a stored status as the API shows it: a database in its recovery window is Deleted
// (with purgeAt).
func apiStatus(status string) string {
	if status == StatusRecoverable {
		return StatusDeleted
	}
	return status
}

// recoveryView shows a deleted database's recovery window on its API view.
func recoveryView(it *Item, in *Instance) {
	it.Status = apiStatus(in.Status)
	if in.PurgeAt != nil && (in.Status == StatusRecoverable || in.Status == StatusDeleting) {
		t := in.PurgeAt.UTC()
		it.PurgeAt = &t
	}
}

// recoverable are the statuses of a database that a delete keeps for the recovery window: it
// holds data. One never made (Provisioning, Failed) is dropped at once.
var recoverable = []string{StatusActive, StatusPaused, StatusPausing, StatusResuming}

// purgeAt is the end of the recovery window of a database deleted now; nil without a window.
func purgeAt(window time.Duration) *time.Time {
	if window <= 0 {
		return nil
	}
	at := time.Now().Add(window).UTC().Truncate(time.Microsecond)
	return &at
}

// deleteIntent is what a DELETE of inst (locked, not Deleting) stores: when it is dropped
// (purgeAt; nil = at once) and its audit event. purge (administrators) drops it at once, one in
// its recovery window included; a plain DELETE of one in its window is 409.
func (s *Service) deleteIntent(inst *Instance, purge bool) (*time.Time, audit.Event, error) {
	ev := audit.Event{Action: "database.deleted", UserID: audit.Int64(inst.UserID), TargetType: "database",
		TargetID: fmt.Sprint(inst.ID), Details: map[string]any{}}
	switch {
	case inst.Status == StatusRecoverable && !purge:
		return nil, ev, fault.Conflict(fmt.Sprintf("The database is already deleted; it can be restored until %s, then it is dropped",
			inst.PurgeAt.UTC().Format(time.RFC3339)))
	case inst.Status == StatusRecoverable:
		ev.Action, ev.Details["reason"] = "database.purged", "purged by an administrator"
		return nil, ev, nil
	case purge:
		ev.Details["purged"] = true
		return nil, ev, nil
	}
	at := purgeAt(recoveryWindow(s.cfg))
	if at == nil || !slices.Contains(recoverable, inst.Status) {
		return nil, ev, nil
	}
	ev.Details["purgeAt"] = *at
	return at, ev, nil
}

// purgeDeleting makes an administrator's purge of a database whose delete is still being driven
// (Deleting with a recovery window) a drop: the window is cleared and the purge audited. Without
// purge, or without a window, the delete is driven again as it was.
func (s *Service) purgeDeleting(ctx context.Context, tx bun.Tx, inst *Instance, purge bool) error {
	if !purge || inst.PurgeAt == nil {
		return nil
	}
	if _, err := tx.NewUpdate().Model(inst).Set("purge_at = NULL").Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("clear the recovery window of database %d: %w", inst.ID, err)
	}
	return s.audit.RecordTx(ctx, tx, audit.Event{Action: "database.purged", UserID: audit.Int64(inst.UserID),
		TargetType: "database", TargetID: fmt.Sprint(inst.ID), Details: map[string]any{"reason": "purged by an administrator"}})
}

// retire finishes the delete of inst while its recovery window is open: the logins of its
// credentials and owner roles are refused and their sessions ended, as a pause does, and the row
// is Recoverable until purge_at, when the finisher claims it again and drops it. It reports
// whether it did (false: the window is over or there is none, and the caller drops it).
func (p *Provisioner) retire(ctx context.Context, tx bun.IDB, inst *Instance, engine Engine) (bool, error) {
	if inst.PurgeAt == nil || !inst.PurgeAt.After(time.Now()) {
		return false, nil
	}
	if err := setCredentialsLogin(ctx, tx, engine, inst, false); err != nil {
		return true, engineError(ctx, p.log, "delete", inst.ID, err)
	}
	if err := ownerLogins(ctx, tx, engine, inst, false); err != nil {
		return true, engineError(ctx, p.log, "delete", inst.ID, err)
	}
	if _, err := provision.Restart(tx.NewUpdate().Model(inst), StatusRecoverable, *inst.PurgeAt).Set("deleted_at = now()").
		WherePK().Exec(ctx); err != nil {
		return true, fmt.Errorf("record database %d recoverable: %w", inst.ID, err)
	}
	return true, nil
}

// purged records the drop of a database whose recovery window ended (database.purged).
func (p *Provisioner) purged(ctx context.Context, tx bun.IDB, inst *Instance) error {
	if inst.Status != StatusRecoverable {
		return nil
	}
	return p.audit.RecordTx(ctx, tx, audit.Event{Action: "database.purged", UserID: audit.Int64(inst.UserID),
		TargetType: "database", TargetID: fmt.Sprint(inst.ID), Details: map[string]any{"reason": "recovery window ended"}})
}

// errWindowOver is the 404 of a restore after the recovery window: the database is gone for the
// API, whether or not the finisher has dropped it yet.
const errWindowOver = "Database not found (its recovery window is over)"

// Restore brings a database in its recovery window back Active, with its data, password and
// credentials: the intent (Restoring) is stored and driven through the finisher, which allows
// the logins again (as a resume does) and finishes it after a crash or an engine failure. userID
// 0 is an administrator's restore, which skips the quota and may give the database to toUserID
// (0: its owner). It returns the row as it then stands and the outcome.
func (s *Service) Restore(ctx context.Context, id, userID, toUserID int64) (*Instance, provision.Outcome, error) {
	return s.change(ctx, id, userID, func(ctx context.Context, tx bun.Tx, inst *Instance) error {
		if inst.Status == StatusRestoring {
			return nil // unfinished: driven again
		}
		if inst.Status != StatusRecoverable {
			return fault.Conflict(fmt.Sprintf("Database is %s; only a deleted database can be restored, within its recovery window",
				apiStatus(inst.Status)))
		}
		if inst.PurgeAt == nil || !inst.PurgeAt.After(time.Now()) {
			return fault.NotFound(errWindowOver)
		}
		owner := inst.UserID
		if toUserID != 0 {
			owner = toUserID
		}
		// An owner's restore counts against their quota; an administrator's does not.
		if err := s.roomFor(ctx, tx, owner, userID == 0); err != nil {
			if toUserID == 0 && userID == 0 && errors.Is(err, fault.ErrNotFound) {
				return fault.Conflict("The database's owner is deleted; restore it to another user (userId)")
			}
			return err
		}
		if _, err := provision.Restart(tx.NewUpdate().Model(inst), StatusRestoring, time.Time{}).Set("user_id = ?", owner).
			Set("purge_at = NULL").Set("deleted_at = NULL").WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("mark database %d restoring: %w", id, err)
		}
		details := map[string]any{}
		if owner != inst.UserID {
			details["fromUserId"], details["toUserId"] = inst.UserID, owner
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "database.restored", UserID: audit.Int64(owner),
			TargetType: "database", TargetID: fmt.Sprint(id), Details: details})
	})
}
