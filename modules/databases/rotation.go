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

// Statuses of a password rotation. Scheduled waits for its time (rotationDays); Pending is
// in-between: the new password is stored (the database's password_sealed, for its login_user)
// and the finisher is setting it on the engine; Retiring: the old login keeps working until
// retire_at, when the finisher takes it away.
const (
	RotationScheduled = "Scheduled"
	RotationPending   = "Pending"
	RotationRetiring  = "Retiring"
	RotationDone      = "Done"
)

// rotationSpec is the rotations' lifecycle: Pending is in between (its request waits for it);
// Scheduled and Retiring rest until due, then the finisher starts the rotation or retires the old
// login; Done ends it.
var rotationSpec = provision.Spec{Name: RotationKind, Rows: "database_password_rotations", Creating: RotationPending,
	Active: RotationDone, Gone: RotationDone, Texts: engineTexts,
	Due: map[string]provision.Verb{RotationScheduled: provision.VerbCreate, RotationRetiring: provision.VerbDelete}}

// Rotation is the stored intent to set a database's owner password on its engine to the one
// stored in the database's row, and to end the owner role's open sessions.
type Rotation struct {
	bun.BaseModel `bun:"table:database_password_rotations,alias:dpr"`

	ID                 int64  `bun:"id,pk,autoincrement"`
	DatabaseInstanceID int64  `bun:"database_instance_id,notnull"`
	Reason             string `bun:"reason,notnull"`
	// NewLogin gets the stored password ("": the current login, in place); OldLogin loses its
	// password at RetireAt, GraceSeconds after NewLogin got the new one ("": none).
	NewLogin     string     `bun:"new_login,notnull"`
	OldLogin     string     `bun:"old_login,notnull"`
	GraceSeconds int        `bun:"grace_seconds,notnull"`
	RetireAt     *time.Time `bun:"retire_at"`
	rowState
}

// Lifecycle implements provision.Stateful.
func (r *Rotation) Lifecycle() *provision.State { return r.lifecycle(r.ID) }

// passwordAAD is what a database's sealed owner password is bound to.
func passwordAAD(engine, databaseName string) string {
	return "database:" + engine + ":" + databaseName
}

// RotationProvisioner finishes password rotations (rotate.go): it starts a Scheduled one when
// due, sets a Pending one's password on the engine and retires the old login at the end of a
// Retiring one's grace. A rotation is never given up: it is retried at the finisher's capped
// backoff.
type RotationProvisioner struct {
	provision.Spec
	engines *Engines
	sealer  *secrets.Sealer
	audit   *audit.Recorder
	log     *slog.Logger
	// grace is the grace period of scheduled rotations, in seconds.
	grace int
}

// Create starts a due Scheduled rotation and applies it, or applies a Pending one (apply).
func (p *RotationProvisioner) Create(ctx context.Context, req provision.CreateRequest) (provision.CreateResponse, error) {
	rot, inst, err := p.load(ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.CreateResponse{}, err
	}
	if rot.Status == RotationScheduled {
		return provision.CreateResponse{}, p.startScheduled(ctx, req.Tx, rot, inst)
	}
	return provision.CreateResponse{ExternalID: inst.Login()}, p.apply(ctx, req.Tx, rot, inst)
}

// Delete retires a Retiring rotation's old login (retire).
func (p *RotationProvisioner) Delete(ctx context.Context, req provision.DeleteRequest) (provision.DeleteResponse, error) {
	rot, inst, err := p.load(ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.DeleteResponse{}, err
	}
	return provision.DeleteResponse{}, p.retire(ctx, req.Tx, rot, inst)
}

// load reads the rotation (the finisher holds its lock) and locks its database's row, so a
// rotation never runs beside the database's own transitions.
func (p *RotationProvisioner) load(ctx context.Context, tx bun.IDB, id int64) (*Rotation, *Instance, error) {
	rot, err := provision.Load[Rotation](ctx, tx, id)
	if err != nil {
		return nil, nil, err
	}
	inst := new(Instance)
	if err := tx.NewSelect().Model(inst).Where("id = ?", rot.DatabaseInstanceID).For("UPDATE").Scan(ctx); err != nil {
		return nil, nil, fmt.Errorf("lock database %d: %w", rot.DatabaseInstanceID, err)
	}
	return rot, inst, nil
}

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

// RevokeOnTakeover gives every database of the account that is not dropped or being dropped (one
// deleted within its recovery window, which a restore brings back, is included) a new password, in the reset's transaction, with no grace: a rotation (startRotation) whose old login
// is retired as soon as the finisher sets the new one, and which also ends the sessions of
// whoever logged in with the old one and takes back what the old holder granted others. Each
// database's rotation is audited (database.password.rotated). It returns the ids
// (databasePasswordsRotated).
func (t *Takeover) RevokeOnTakeover(ctx context.Context, tx bun.IDB, userID int64) (map[string]any, error) {
	var insts []Instance
	if err := tx.NewSelect().Model(&insts).Where("user_id = ?", userID).
		Where("status <> ?", StatusDeleted).Where("NOT (status = ? AND purge_at IS NULL)", StatusDeleting).OrderExpr("id").For("UPDATE").
		Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("list databases of user %d: %w", userID, err)
	}
	if len(insts) == 0 {
		return map[string]any{}, nil
	}
	ids := make([]int64, 0, len(insts))
	for i := range insts {
		inst := &insts[i]
		if _, _, err := startRotation(ctx, tx, t.sealer, inst, nil, 0, takeoverReason, true); err != nil {
			return nil, err
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
