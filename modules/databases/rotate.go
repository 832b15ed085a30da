package databases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// loginRotator is an engine where a database has two login roles taking turns, so a password
// changes without downtime: its owner role (DatabaseUser) and secondLogin(owner), made at the
// first rotation, a member of the owner role (PostgreSQL) or an account with the owner's grants
// (MySQL/MariaDB). Every method is repeatable; a login that does not exist is a no-op, and a
// second login not carrying loginMarker is ErrRoleTaken and left alone.
type loginRotator interface {
	// PromoteLogin makes login (the owner or the second login) usable with password at once:
	// made if needed, unexpired, allowed to log in unless paused, and its open sessions ended
	// (they logged in with an older password).
	PromoteLogin(ctx context.Context, dbName, owner, login, password string, paused bool) error
	// ExpireLogin has the server refuse login's password after at where it can (PostgreSQL VALID
	// UNTIL); RetireLogin still follows at at.
	ExpireLogin(ctx context.Context, dbName, owner, login string, at time.Time) error
	// RetireLogin takes login's password away (one nobody holds), refuses its logins and ends
	// its sessions.
	RetireLogin(ctx context.Context, dbName, owner, login string) error
	// SetSecondLogin refuses (ending its sessions) or allows the second login's logins, as
	// SetLogin does the owner's: pause and resume. A retired second login stays useless.
	SetSecondLogin(ctx context.Context, dbName, owner string, enabled bool) error
	// DropSecondLogin drops the second login (the database's drop).
	DropSecondLogin(ctx context.Context, dbName, owner string) error
}

// secondLogin is the login role taking turns with owner; credentials never take the suffix.
func secondLogin(owner string) string { return owner + secondLoginSuffix }

const secondLoginSuffix = "_login"

// loginMarker is the mark the second login of dbName carries (as a credential's role does).
func loginMarker(dbName string) string { return "provisioner:login:" + dbName }

// checkLogin refuses a login that is neither owner nor its second login.
func checkLogin(dbName, owner, login string) error {
	if err := checkNames(dbName, owner, login); err != nil {
		return err
	}
	if login != owner && login != secondLogin(owner) {
		return fmt.Errorf("%q is not a login of %q", login, owner)
	}
	return nil
}

// Login is the login role whose password is stored (the one the reveal shows).
func (in *Instance) Login() string {
	if in.LoginUser != "" {
		return in.LoginUser
	}
	return in.DatabaseUser
}

// otherLogin is the login role that takes turns with Login.
func (in *Instance) otherLogin() string {
	if in.Login() == in.DatabaseUser {
		return secondLogin(in.DatabaseUser)
	}
	return in.DatabaseUser
}

// Reasons of rotations (and of their audit events).
const (
	reasonRequested = "requested"
	reasonScheduled = "scheduled"
)

// MaxGraceSeconds bounds a rotation's grace period (a day).
const MaxGraceSeconds = 86400

// errRotationBusy is the 409 of a rotation while the previous one is still being set on the engine.
const errRotationBusy = "The previous password rotation is still being set on the engine; try again"

// startRotation stores, under tx's lock on inst, a Pending rotation (into, or a new row) that gives
// a new sealed password to the other login and retires the current one graceSeconds later; open
// rotations are superseded, and a Pending one is 409 unless force (a takeover). A database not yet
// on its engine has its password changed in place. It returns the rotation and the new password.
func startRotation(ctx context.Context, tx bun.IDB, sealer *secrets.Sealer, inst *Instance, into *Rotation,
	graceSeconds int, reason string, force bool) (*Rotation, string, error) {
	var open []Rotation
	if err := tx.NewSelect().Model(&open).Where("database_instance_id = ?", inst.ID).
		Where("status IN (?)", bun.In([]string{RotationPending, RotationRetiring})).For("UPDATE SKIP LOCKED").Scan(ctx); err != nil {
		return nil, "", fmt.Errorf("open rotations of database %d: %w", inst.ID, err)
	}
	if !force {
		if next, pending, err := pendingRotation(ctx, tx, inst.ID); err != nil {
			return nil, "", err
		} else if pending {
			return nil, "", fault.Conflict(errRotationBusy).WithRetryAfter(max(time.Until(next), time.Second))
		}
	}
	for _, o := range open {
		if _, err := provision.Attempted(provision.Move(tx.NewUpdate().Model(&o), RotationDone), errSuperseded).WherePK().Exec(ctx); err != nil {
			return nil, "", fmt.Errorf("supersede rotation %d: %w", o.ID, err)
		}
	}
	password := secrets.RandomPassword()
	sealed, err := sealer.Seal([]byte(password), passwordAAD(inst.Engine, inst.DatabaseName))
	if err != nil {
		return nil, "", err
	}
	rot := into
	if rot == nil {
		rot = &Rotation{DatabaseInstanceID: inst.ID}
	}
	rot.Status, rot.Reason, rot.NextAttemptAt = RotationPending, reason, time.Now()
	rot.NewLogin, rot.OldLogin, rot.GraceSeconds, rot.RetireAt = inst.otherLogin(), inst.Login(), graceSeconds, nil
	if inst.Status == StatusProvisioning || inst.Status == StatusFailed {
		rot.NewLogin, rot.OldLogin = "", ""
	}
	if rot.NewLogin != "" {
		inst.LoginUser = rot.NewLogin
	}
	inst.PasswordSealed = sealed
	if _, err := tx.NewUpdate().Model(inst).Column("password_sealed", "login_user").Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
		return nil, "", fmt.Errorf("store the new password of database %d: %w", inst.ID, err)
	}
	if into == nil {
		_, err = tx.NewInsert().Model(rot).Returning("*").Exec(ctx)
	} else {
		_, err = provision.Restart(tx.NewUpdate().Model(rot).Column("reason", "new_login", "old_login", "grace_seconds", "retire_at"),
			RotationPending, time.Time{}).WherePK().Exec(ctx)
	}
	if err != nil {
		return nil, "", fmt.Errorf("store the password rotation of database %d: %w", inst.ID, err)
	}
	return rot, password, reschedule(ctx, tx, inst.ID, inst.RotationDays)
}

// reschedule replaces database id's Scheduled rotation with one due days from now (none for 0).
// One the finisher holds is skipped; it finds a newer rotation when it gets the row and ends.
func reschedule(ctx context.Context, tx bun.IDB, id int64, days int) error {
	var ids []int64
	if err := tx.NewSelect().Model((*Rotation)(nil)).Column("id").Where("database_instance_id = ?", id).
		Where("status = ?", RotationScheduled).For("UPDATE SKIP LOCKED").Scan(ctx, &ids); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("scheduled rotations of database %d: %w", id, err)
	}
	if len(ids) > 0 {
		if _, err := tx.NewDelete().Model((*Rotation)(nil)).Where("id IN (?)", bun.In(ids)).Exec(ctx); err != nil {
			return fmt.Errorf("unschedule rotations of database %d: %w", id, err)
		}
	}
	if days <= 0 {
		return nil
	}
	rot := &Rotation{DatabaseInstanceID: id, Reason: reasonScheduled, rowState: rowState{Status: RotationScheduled,
		Retries: provision.Retries{NextAttemptAt: time.Now().AddDate(0, 0, days)}}}
	if _, err := tx.NewInsert().Model(rot).Exec(ctx); err != nil {
		return fmt.Errorf("schedule the rotation of database %d: %w", id, err)
	}
	return nil
}

// errSuperseded is why a rotation ended when a later one of its database started.
var errSuperseded = errors.New("superseded")

// superseded tells whether a rotation of rot's database was started after rot.
func superseded(ctx context.Context, tx bun.IDB, rot *Rotation) (bool, error) {
	return tx.NewSelect().Model((*Rotation)(nil)).Where("database_instance_id = ?", rot.DatabaseInstanceID).
		Where("id > ?", rot.ID).Where("status <> ?", RotationScheduled).Exists(ctx)
}

// done marks rot Done through tx.
func done(ctx context.Context, tx bun.IDB, rot *Rotation) error {
	if _, err := provision.Succeed(tx.NewUpdate().Model(rot), RotationDone).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("record password rotation %d done: %w", rot.ID, err)
	}
	return nil
}

// paused tells whether inst's logins are (or are about to be) refused: paused, or deleted within
// its recovery window; resume or restore allows them (ownerLogins).
func paused(inst *Instance) bool {
	switch inst.Status {
	case StatusPaused, StatusPausing, StatusResuming, StatusRecoverable, StatusDeleting:
		return true
	}
	return false
}

// dropped tells whether inst is gone from its engine or about to be with no way back (a delete
// without a recovery window): its logins need nothing more.
func dropped(inst *Instance) bool {
	return inst.Status == StatusDeleted || (inst.Status == StatusDeleting && inst.PurgeAt == nil)
}

// apply sets a Pending rotation's password on the engine: the new login gets it (at once
// usable), the old one expires at the end of the grace (Retiring until then; with no grace it is
// retired now). A takeover's also closes the database to the roles the old holder let in, as a
// pause does (keeping the logins and access credentials). A database in its recovery window gets
// it too, its logins kept refused (a restore brings the new password back). A dropped database
// (dropped), or a rotation superseded since, needs nothing.
func (p *RotationProvisioner) apply(ctx context.Context, tx bun.IDB, rot *Rotation, inst *Instance) error {
	if dropped(inst) {
		return done(ctx, tx, rot)
	}
	if later, err := superseded(ctx, tx, rot); err != nil || later {
		if err != nil {
			return err
		}
		return done(ctx, tx, rot)
	}
	engine := p.engines.Get(inst.Engine)
	if engine == nil {
		return &EngineError{Msg: "rotate: engine not configured", err: fmt.Errorf("engine %q is not configured", inst.Engine)}
	}
	pw, err := p.sealer.Open(inst.PasswordSealed, passwordAAD(inst.Engine, inst.DatabaseName))
	if err != nil {
		return fmt.Errorf("open password of database %d: %w", inst.ID, err)
	}
	ectx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	fail := func(err error) error { return engineError(ctx, p.log, "rotate", inst.ID, err) }
	status := RotationDone
	if rot.NewLogin == "" { // in place: a database not made yet, or a rotation stored before logins took turns
		if err := engine.SetOwnerPassword(ectx, inst.DatabaseName, inst.Login(), string(pw)); err != nil {
			return fail(err)
		}
	} else {
		lr, ok := engine.(loginRotator)
		if !ok {
			return fail(fmt.Errorf("engine %q does not rotate logins", inst.Engine))
		}
		if err := lr.PromoteLogin(ectx, inst.DatabaseName, inst.DatabaseUser, rot.NewLogin, string(pw), paused(inst)); err != nil {
			return fail(err)
		}
		if rot.OldLogin != "" && rot.OldLogin != rot.NewLogin {
			at := time.Now().Add(time.Duration(rot.GraceSeconds) * time.Second)
			if rot.GraceSeconds == 0 {
				err = lr.RetireLogin(ectx, inst.DatabaseName, inst.DatabaseUser, rot.OldLogin)
			} else {
				status, rot.RetireAt = RotationRetiring, &at
				err = lr.ExpireLogin(ectx, inst.DatabaseName, inst.DatabaseUser, rot.OldLogin, at)
			}
			if err != nil {
				return fail(err)
			}
		}
	}
	if r, ok := engine.(foreignAccessRevoker); ok && rot.Reason != reasonRequested && rot.Reason != reasonScheduled {
		var keep []string
		if err := tx.NewSelect().Model((*Credential)(nil)).Column("username").Where("database_instance_id = ?", inst.ID).
			Where("status <> ?", CredentialDeleted).OrderExpr("id").Scan(ctx, &keep); err != nil {
			return fmt.Errorf("list credentials of database %d: %w", inst.ID, err)
		}
		if err := r.RevokeForeignAccess(ectx, inst.DatabaseName, inst.DatabaseUser, append(keep, inst.otherLogin())); err != nil {
			return fail(err)
		}
	}
	var due time.Time // Retiring: due at the end of the grace
	if rot.RetireAt != nil {
		due = *rot.RetireAt
	}
	if _, err := provision.Restart(tx.NewUpdate().Model(rot), status, due).Set("retire_at = ?", rot.RetireAt).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("record password rotation %d: %w", rot.ID, err)
	}
	return nil
}

// retire ends a Retiring rotation's grace: its old login's password is taken away and its
// sessions end (audited database.password.retired), whatever the database's state: one deleted
// within its recovery window may be restored, and its old login must not come back with it.
// Nothing is left to do once the database is dropped (dropped), or when a later rotation made the
// old login current again.
func (p *RotationProvisioner) retire(ctx context.Context, tx bun.IDB, rot *Rotation, inst *Instance) error {
	later, err := superseded(ctx, tx, rot)
	if err != nil {
		return err
	}
	if later || dropped(inst) || rot.OldLogin == "" || rot.OldLogin == inst.Login() {
		return done(ctx, tx, rot)
	}
	engine := p.engines.Get(inst.Engine)
	lr, ok := engine.(loginRotator)
	if !ok {
		return &EngineError{Msg: "retire: engine not configured", err: fmt.Errorf("engine %q does not rotate logins", inst.Engine)}
	}
	ectx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	if err := lr.RetireLogin(ectx, inst.DatabaseName, inst.DatabaseUser, rot.OldLogin); err != nil {
		return engineError(ctx, p.log, "retire", inst.ID, err)
	}
	if err := p.audit.RecordTx(ctx, tx, audit.Event{Action: "database.password.retired", UserID: audit.Int64(inst.UserID),
		TargetType: "database", TargetID: fmt.Sprint(inst.ID), Details: map[string]any{"login": rot.OldLogin}}); err != nil {
		return err
	}
	return done(ctx, tx, rot)
}

// scheduledRetry is how long a due Scheduled rotation waits while its database is in another
// change or a rotation is still open.
const scheduledRetry = time.Hour

// startScheduled turns a due Scheduled rotation into a Pending one with the configured grace
// (audited database.password.rotated, reason scheduled) and applies it; the next one is scheduled
// rotationDays from now. Ended without a rotation when the database is gone, its schedule is off
// or a rotation started since; put off while the database is not Active or Paused (in its recovery
// window, say: until it is restored) or a rotation is still open.
func (p *RotationProvisioner) startScheduled(ctx context.Context, tx bun.IDB, rot *Rotation, inst *Instance) error {
	later, err := superseded(ctx, tx, rot)
	if err != nil {
		return err
	}
	if later || inst.RotationDays == 0 || dropped(inst) {
		return done(ctx, tx, rot)
	}
	open, err := tx.NewSelect().Model((*Rotation)(nil)).Where("database_instance_id = ?", inst.ID).
		Where("status IN (?)", bun.In([]string{RotationPending, RotationRetiring})).Exists(ctx)
	if err != nil {
		return fmt.Errorf("open rotations of database %d: %w", inst.ID, err)
	}
	if open || (inst.Status != StatusActive && inst.Status != StatusPaused) {
		_, err := provision.Restart(tx.NewUpdate().Model(rot), RotationScheduled, time.Now().Add(scheduledRetry)).WherePK().Exec(ctx)
		return err
	}
	if _, _, err := startRotation(ctx, tx, p.sealer, inst, rot, p.grace, reasonScheduled, false); err != nil {
		return err
	}
	if err := p.audit.RecordTx(ctx, tx, rotatedEvent(inst, rot)); err != nil {
		return err
	}
	return p.apply(ctx, tx, rot, inst)
}

// rotatedEvent is the audit event of a started rotation.
func rotatedEvent(inst *Instance, rot *Rotation) audit.Event {
	return audit.Event{Action: "database.password.rotated", UserID: audit.Int64(inst.UserID), TargetType: "database",
		TargetID: fmt.Sprint(inst.ID), Details: map[string]any{"reason": rot.Reason, "gracePeriodSeconds": rot.GraceSeconds,
			"login": rot.NewLogin, "previousLogin": rot.OldLogin}}
}

// setSecondLogin refuses or allows the logins of inst's second login (ownerLogins).
func setSecondLogin(ctx context.Context, engine Engine, inst *Instance, enabled bool) error {
	lr, ok := engine.(loginRotator)
	if !ok {
		return nil
	}
	if err := lr.SetSecondLogin(ctx, inst.DatabaseName, inst.DatabaseUser, enabled); err != nil && !errors.Is(err, ErrRoleTaken) {
		return fmt.Errorf("set login of %s: %w", secondLogin(inst.DatabaseUser), err)
	}
	return nil
}

// retireLogin retires login of inst (RetireLogin): a second login not made, or not ours, needs
// nothing.
func retireLogin(ctx context.Context, engine Engine, inst *Instance, login string) error {
	lr, ok := engine.(loginRotator)
	if !ok {
		return nil
	}
	if err := lr.RetireLogin(ctx, inst.DatabaseName, inst.DatabaseUser, login); err != nil && !errors.Is(err, ErrRoleTaken) {
		return fmt.Errorf("retire %s: %w", login, err)
	}
	return nil
}

// graceKeeps tells whether inst's other login (otherLogin) is still to log in: an open rotation
// keeps it through its grace (Pending with a grace, Retiring before retire_at).
func graceKeeps(ctx context.Context, tx bun.IDB, inst *Instance) (bool, error) {
	ok, err := tx.NewSelect().Model((*Rotation)(nil)).Where("database_instance_id = ?", inst.ID).
		Where("old_login = ?", inst.otherLogin()).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("status = ? AND grace_seconds > 0", RotationPending).
				WhereOr("status = ? AND retire_at > now()", RotationRetiring)
		}).Exists(ctx)
	if err != nil {
		return false, fmt.Errorf("open rotations of database %d: %w", inst.ID, err)
	}
	return ok, nil
}

// dropSecondLogin drops inst's second login (the database's drop).
func dropSecondLogin(ctx context.Context, engine Engine, inst *Instance) error {
	lr, ok := engine.(loginRotator)
	if !ok {
		return nil
	}
	if err := lr.DropSecondLogin(ctx, inst.DatabaseName, inst.DatabaseUser); err != nil && !errors.Is(err, ErrRoleTaken) {
		return fmt.Errorf("drop %s: %w", secondLogin(inst.DatabaseUser), err)
	}
	return nil
}

// Rotated is the answer of POST /api/me/databases/{id}/rotate-password.
type Rotated struct {
	Reveal
	PreviousUser       string     `json:"previousUser" doc:"The login whose password keeps working until previousValidUntil."`
	PreviousValidUntil *time.Time `json:"previousValidUntil" doc:"When the old password stops working and its sessions end; null: at once."`
}

// RotatePassword gives an own database a new password with a grace period for the old one: the
// rotation is stored (startRotation, audited database.password.rotated) and driven now. When the
// engine fails the answer is 502 and the finisher sets it; the old password works meanwhile.
func (s *Service) RotatePassword(ctx context.Context, id, userID int64, graceSeconds int) (*Rotated, error) {
	if graceSeconds < 0 || graceSeconds > MaxGraceSeconds {
		return nil, fault.InvalidField("gracePeriodSeconds", "must be between 0 and 86400")
	}
	release, err := s.waits.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var rot *Rotation
	var password string
	var inst *Instance
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		inst, err = s.lock(ctx, tx, id, userID)
		if err != nil {
			return err
		}
		if inst.Status != StatusActive && inst.Status != StatusPaused {
			return fault.Conflict(fmt.Sprintf("Database is %s; only an Active or Paused database's password can be rotated", apiStatus(inst.Status)))
		}
		if _, ok := s.engines.Get(inst.Engine).(loginRotator); !ok {
			return fault.Unavailable("The database's engine is not configured")
		}
		rot, password, err = startRotation(ctx, tx, s.sealer, inst, nil, graceSeconds, reasonRequested, false)
		if err != nil {
			return err
		}
		return s.audit.RecordTx(ctx, tx, rotatedEvent(inst, rot))
	})
	if err != nil {
		return nil, err
	}
	rot, o, err := provision.Run[Rotation](ctx, s.finisher, s.db, rotationSpec, rot.ID, provision.Again)
	if err != nil {
		return nil, err
	}
	if o.Result != provision.Done {
		e := fault.Upstream("The database engine failed; the new password is set in the background (reveal it then) "+
			"and the old one keeps working until then", nil)
		if o.Result == provision.Pending {
			e = e.WithRetryAfter(max(time.Until(o.RetryAt), time.Second))
		}
		return nil, e
	}
	out := &Rotated{Reveal: Reveal{DatabaseUser: inst.Login(), Password: password}, PreviousUser: rot.OldLogin}
	out.ConnectionString = s.engines.Get(inst.Engine).ConnectionString(inst.DatabaseName, inst.Login(), password)
	if rot.RetireAt != nil {
		t := rot.RetireAt.UTC()
		out.PreviousValidUntil = &t
	}
	return out, nil
}
