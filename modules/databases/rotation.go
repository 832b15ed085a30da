package databases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// RotationKind is the finisher's name for owner password rotations.
const RotationKind provision.Kind = "database-password"

// Statuses of an owner password rotation. Pending is in-between: the new password is stored
// (the database's password_sealed) and the finisher is setting it on the engine.
const (
	RotationPending = "Pending"
	RotationDone    = "Done"
)

// Rotation is the stored intent to set a database's owner password on its engine to the one
// stored in the database's row, and to end the owner role's open sessions.
type Rotation struct {
	bun.BaseModel `bun:"table:database_password_rotations,alias:dpr"`

	ID                 int64     `bun:"id,pk,autoincrement"`
	DatabaseInstanceID int64     `bun:"database_instance_id,notnull"`
	Status             string    `bun:"status,notnull"`
	Reason             string    `bun:"reason,notnull"`
	Attempts           int       `bun:"attempts,notnull"`
	NextAttemptAt      time.Time `bun:"next_attempt_at,notnull"`
	LastError          string    `bun:"last_error,notnull"`
	CreatedAt          time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt          time.Time `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
}

// passwordAAD is what a database's sealed owner password is bound to.
func passwordAAD(engine, databaseName string) string {
	return "database:" + engine + ":" + databaseName
}

// RotationProvisioner finishes owner password rotations: it sets the password stored in the
// database's row on the engine and ends the role's sessions, then marks the rotation Done. A
// rotation is never given up: it is retried at the finisher's capped backoff.
type RotationProvisioner struct {
	engines *Engines
	sealer  *secrets.Sealer
	log     *slog.Logger
}

// Kind implements provision.Provisioner.
func (p *RotationProvisioner) Kind() provision.Kind { return RotationKind }

// Table implements provision.Queue.
func (p *RotationProvisioner) Table() string { return "database_password_rotations" }

// InFlight implements provision.Queue.
func (p *RotationProvisioner) InFlight() map[string]provision.Verb {
	return map[string]provision.Verb{RotationPending: provision.VerbCreate}
}

// Create applies a Pending rotation under the database row's lock (never beside its own
// transitions): it sets the newest stored password on the engine, ends the role's sessions and,
// where a tenant can give other roles a way in (PostgreSQL), revokes those as a pause does, keeping
// the database's access credentials. A database being deleted or a role not yet created needs
// nothing. Repeatable.
func (p *RotationProvisioner) Create(ctx context.Context, req provision.CreateRequest) (provision.CreateResponse, error) {
	rot := new(Rotation)
	if err := req.Tx.NewSelect().Model(rot).Where("id = ?", req.ResourceID).Scan(ctx); err != nil {
		return provision.CreateResponse{}, fmt.Errorf("load password rotation %d: %w", req.ResourceID, err)
	}
	inst := new(Instance)
	if err := req.Tx.NewSelect().Model(inst).Where("id = ?", rot.DatabaseInstanceID).For("UPDATE").Scan(ctx); err != nil {
		return provision.CreateResponse{}, fmt.Errorf("lock database %d: %w", rot.DatabaseInstanceID, err)
	}
	if inst.Status != StatusDeleted && inst.Status != StatusDeleting {
		engine := p.engines.Get(inst.Engine)
		if engine == nil {
			return provision.CreateResponse{}, &EngineError{Msg: "rotate: engine not configured",
				err: fmt.Errorf("engine %q is not configured", inst.Engine)}
		}
		pw, err := p.sealer.Open(inst.PasswordSealed, passwordAAD(inst.Engine, inst.DatabaseName))
		if err != nil {
			return provision.CreateResponse{}, fmt.Errorf("open password of database %d: %w", inst.ID, err)
		}
		ectx, cancel := context.WithTimeout(ctx, engineTimeout)
		defer cancel()
		if err := engine.SetOwnerPassword(ectx, inst.DatabaseName, inst.DatabaseUser, string(pw)); err != nil {
			return provision.CreateResponse{}, engineError(ctx, p.log, "rotate", inst.ID, err)
		}
		if r, ok := engine.(foreignAccessRevoker); ok {
			var keep []string
			if err := req.Tx.NewSelect().Model((*Credential)(nil)).Column("username").Where("database_instance_id = ?", inst.ID).
				Where("status <> ?", CredentialDeleted).OrderExpr("id").Scan(ctx, &keep); err != nil {
				return provision.CreateResponse{}, fmt.Errorf("list credentials of database %d: %w", inst.ID, err)
			}
			if err := r.RevokeForeignAccess(ectx, inst.DatabaseName, inst.DatabaseUser, keep); err != nil {
				return provision.CreateResponse{}, engineError(ctx, p.log, "rotate", inst.ID, err)
			}
		}
	}
	if _, err := req.Tx.NewUpdate().Model(rot).Set("status = ?", RotationDone).Set("last_error = ''").
		Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
		return provision.CreateResponse{}, fmt.Errorf("record password rotation %d done: %w", rot.ID, err)
	}
	return provision.CreateResponse{ExternalID: inst.DatabaseUser}, nil
}

// Delete is never called (no status maps to it).
func (p *RotationProvisioner) Delete(context.Context, provision.DeleteRequest) (provision.DeleteResponse, error) {
	return provision.DeleteResponse{}, errors.New("password rotations are not deleted")
}

var (
	_ provision.Provisioner = (*RotationProvisioner)(nil)
	_ provision.Queue       = (*RotationProvisioner)(nil)
)

// Takeover rotates the owner passwords of an account's databases when a password reset takes the
// account over (provision.TakeoverRevoker and provision.TakeoverFollower).
type Takeover struct {
	db       bun.IDB
	sealer   *secrets.Sealer
	audit    *audit.Recorder
	finisher *provision.Finisher
	log      *slog.Logger
}

// takeoverReason is the reason of the rotations and of their audit events.
const takeoverReason = "password reset took the account over"

// RevokeOnTakeover gives every database of the account that is not being deleted a new owner
// password, in the reset's transaction: the new password is stored sealed (as create stores it)
// and a Pending rotation row asks the finisher to set it on the engine and end the sessions of
// whoever logged in with the old one. Each database's rotation is audited
// (database.password.rotated). It returns the ids (databasePasswordsRotated).
func (t *Takeover) RevokeOnTakeover(ctx context.Context, tx bun.IDB, userID int64) (map[string]any, error) {
	var insts []Instance
	if err := tx.NewSelect().Model(&insts).Where("user_id = ?", userID).
		Where("status NOT IN (?)", bun.In([]string{StatusDeleted, StatusDeleting})).OrderExpr("id").For("UPDATE").
		Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("list databases of user %d: %w", userID, err)
	}
	if len(insts) == 0 {
		return map[string]any{}, nil
	}
	ids := make([]int64, 0, len(insts))
	for _, inst := range insts {
		sealed, err := t.sealer.Seal([]byte(secrets.RandomPassword()), passwordAAD(inst.Engine, inst.DatabaseName))
		if err != nil {
			return nil, err
		}
		if _, err := tx.NewUpdate().Model((*Instance)(nil)).Set("password_sealed = ?", sealed).Set("updated_at = now()").
			Where("id = ?", inst.ID).Exec(ctx); err != nil {
			return nil, fmt.Errorf("store the new password of database %d: %w", inst.ID, err)
		}
		rot := &Rotation{DatabaseInstanceID: inst.ID, Status: RotationPending, Reason: takeoverReason, NextAttemptAt: time.Now()}
		if _, err := tx.NewInsert().Model(rot).Exec(ctx); err != nil {
			return nil, fmt.Errorf("store the password rotation of database %d: %w", inst.ID, err)
		}
		if err := t.audit.RecordTx(ctx, tx, audit.Event{Action: "database.password.rotated", UserID: audit.Int64(userID),
			TargetType: "database", TargetID: fmt.Sprint(inst.ID), Details: map[string]any{"reason": takeoverReason}}); err != nil {
			return nil, err
		}
		ids = append(ids, inst.ID)
	}
	return map[string]any{"databasePasswordsRotated": ids}, nil
}

// followTimeout bounds how long the reset's answer waits for the rotations; what is left then
// is finished by the finisher.
const followTimeout = 10 * time.Second

// FollowTakeover drives the account's Pending rotations now, once the reset has committed, so the
// old passwords stop working before the reset is answered. One that fails (the engine is down) is
// left to the finisher, which retries it.
func (t *Takeover) FollowTakeover(ctx context.Context, userID int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), followTimeout)
	defer cancel()
	var ids []int64
	if err := t.db.NewSelect().Model((*Rotation)(nil)).Column("dpr.id").
		Join("JOIN database_instances AS di ON di.id = dpr.database_instance_id").
		Where("di.user_id = ?", userID).Where("dpr.status = ?", RotationPending).OrderExpr("dpr.id").
		Scan(ctx, &ids); err != nil {
		t.log.WarnContext(ctx, "list pending password rotations", "user", userID, "error", err.Error())
		return
	}
	for _, id := range ids {
		if err := t.finisher.DriveNow(ctx, RotationKind, id); err != nil {
			t.log.WarnContext(ctx, "password rotation left to the finisher", "rotation", id, "error", err.Error())
		}
	}
}

var (
	_ provision.TakeoverRevoker  = (*Takeover)(nil)
	_ provision.TakeoverFollower = (*Takeover)(nil)
)

// pendingRotation reports when the next attempt of a Pending rotation of database id is due, and
// whether there is one.
func pendingRotation(ctx context.Context, db bun.IDB, id int64) (time.Time, bool, error) {
	var next time.Time
	err := db.NewSelect().Model((*Rotation)(nil)).Column("next_attempt_at").
		Where("database_instance_id = ?", id).Where("status = ?", RotationPending).OrderExpr("next_attempt_at").Limit(1).
		Scan(ctx, &next)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("pending password rotation of database %d: %w", id, err)
	}
	return next, true, nil
}
