package databases

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// Provisioner creates and drops tenant databases on their engines. It reads the intent from the
// row the finisher has locked and records the outcome through the same transaction.
type Provisioner struct {
	provision.Spec
	// recovery is Databases:RecoveryHours: how long a deleted user's databases stay recoverable.
	recovery time.Duration
	engines  *Engines
	sealer   *secrets.Sealer
	audit    *audit.Recorder
	log      *slog.Logger
}

func (p *Provisioner) load(ctx context.Context, tx bun.IDB, id int64) (*Instance, Engine, error) {
	inst, err := provision.Load[Instance](ctx, tx, id)
	if err != nil {
		return nil, nil, err
	}
	engine := p.engines.Get(inst.Engine)
	if engine == nil {
		return inst, nil, &EngineError{Msg: "engine not configured", err: fmt.Errorf("engine %q is not configured", inst.Engine)}
	}
	return inst, engine, nil
}

// Create makes the role and database on the engine (adopting them if a crash interrupted an
// earlier attempt) and marks the row Active. An engine error is returned for a retry.
func (p *Provisioner) Create(ctx context.Context, req provision.CreateRequest) (provision.CreateResponse, error) {
	inst, engine, err := p.load(ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.CreateResponse{}, err
	}
	pw, err := p.sealer.Open(inst.PasswordSealed, passwordAAD(inst.Engine, inst.DatabaseName))
	if err != nil {
		return provision.CreateResponse{}, fmt.Errorf("open password of database %d: %w", inst.ID, err)
	}
	ectx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	if err := engine.Create(ectx, inst.DatabaseName, inst.DatabaseUser, string(pw)); err != nil {
		return provision.CreateResponse{}, engineError(ctx, p.log, "create", inst.ID, err)
	}
	if _, err := provision.Succeed(req.Tx.NewUpdate().Model(inst), StatusActive).WherePK().Exec(ctx); err != nil {
		return provision.CreateResponse{}, fmt.Errorf("record database %d active: %w", inst.ID, err)
	}
	if err := p.audit.RecordTx(ctx, req.Tx, audit.Event{Action: "database.created", UserID: audit.Int64(inst.UserID),
		TargetType: "database", TargetID: fmt.Sprint(inst.ID),
		Details: map[string]any{"engine": inst.Engine, "databaseName": inst.DatabaseName}}); err != nil {
		return provision.CreateResponse{}, err
	}
	return provision.CreateResponse{ExternalID: inst.DatabaseName}, nil
}

// Delete drops the database, its role and its extra credentials on the engine, then marks the
// row Deleted; within its recovery window it only refuses their logins (retire). Dropping what is
// already gone is not an error.
func (p *Provisioner) Delete(ctx context.Context, req provision.DeleteRequest) (provision.DeleteResponse, error) {
	inst, engine, err := p.load(ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.DeleteResponse{}, err
	}
	ectx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	if retired, err := p.retire(ectx, req.Tx, inst, engine); retired || err != nil {
		return provision.DeleteResponse{}, err
	}
	var creds []Credential
	if err := req.Tx.NewSelect().Model(&creds).Where("database_instance_id = ?", inst.ID).
		Where("status <> 'Deleted'").Scan(ctx); err != nil {
		return provision.DeleteResponse{}, fmt.Errorf("list credentials of database %d: %w", inst.ID, err)
	}
	for _, c := range creds {
		// A role the credential did not make (ErrRoleTaken) is not ours to drop.
		if err := engine.DropUser(ectx, inst.DatabaseName, c.Username, CredentialMarker(c.ID, c.MarkerToken)); err != nil && !errors.Is(err, ErrRoleTaken) {
			return provision.DeleteResponse{}, engineError(ctx, p.log, "drop", inst.ID, fmt.Errorf("drop credential %s: %w", c.Username, err))
		}
	}
	if err := dropSecondLogin(ectx, engine, inst); err != nil {
		return provision.DeleteResponse{}, engineError(ctx, p.log, "drop", inst.ID, err)
	}
	if err := engine.Drop(ectx, inst.DatabaseName, inst.DatabaseUser); err != nil {
		return provision.DeleteResponse{}, engineError(ctx, p.log, "drop", inst.ID, err)
	}
	if _, err := provision.Move(req.Tx.NewUpdate().Model((*Credential)(nil)), CredentialDeleted).
		Where("database_instance_id = ?", inst.ID).Exec(ctx); err != nil {
		return provision.DeleteResponse{}, err
	}
	// Each credential dropped with its database is audited as deleted, as one deleted on its own is.
	for i := range creds {
		ev := credentialEvent("access_credential.deleted", inst, &creds[i])
		ev.Details["reason"] = "database.deleted"
		if err := p.audit.RecordTx(ctx, req.Tx, ev); err != nil {
			return provision.DeleteResponse{}, err
		}
	}
	if _, err := provision.Succeed(req.Tx.NewUpdate().Model(inst), StatusDeleted).Set("deleted_at = now()").Set("purge_at = NULL").
		WherePK().Exec(ctx); err != nil {
		return provision.DeleteResponse{}, fmt.Errorf("record database %d deleted: %w", inst.ID, err)
	}
	return provision.DeleteResponse{}, p.purged(ctx, req.Tx, inst)
}

// MsgInternal is the errorMessage of an attempt that failed on the service's side: anything but an
// engine's failure (EngineError, already short and logged in full) or a call put off, e.g. our
// control database refusing a statement or a sealed password that does not open.
const MsgInternal = "internal error (details in the server log)"

// ReleaseUser marks every database of a deleted user for deleting, with the recovery window a
// delete by its owner has (an administrator may restore one to another user meanwhile), and
// records database.deleted for each (the actor is whoever deleted the user).
func (p *Provisioner) ReleaseUser(ctx context.Context, tx bun.IDB, userID int64) error {
	released, err := p.Release(ctx, tx, (*Instance)(nil), userID, p.Counted, func(q *bun.UpdateQuery) *bun.UpdateQuery {
		return q.Set("purge_at = CASE WHEN status IN (?) THEN ?::timestamptz END", bun.In(recoverable), purgeAt(p.recovery))
	})
	if err != nil {
		return err
	}
	for _, id := range released {
		if err := p.audit.RecordTx(ctx, tx, audit.Event{Action: "database.deleted", UserID: audit.Int64(userID),
			TargetType: "database", TargetID: fmt.Sprint(id), Details: map[string]any{"reason": "user.deleted"}}); err != nil {
			return err
		}
	}
	return nil
}

// Suspend refuses the logins of the database's role and of every credential role of the
// database, ends their sessions, then marks the row Paused.
func (p *Provisioner) Suspend(ctx context.Context, req provision.SuspendRequest) error {
	return p.setLogin(ctx, req.Tx, req.ResourceID, false)
}

// Resume allows the logins of the database's role and of its Active credentials again and marks
// the row Active.
func (p *Provisioner) Resume(ctx context.Context, req provision.ResumeRequest) error {
	return p.setLogin(ctx, req.Tx, req.ResourceID, true)
}

// setLogin switches the logins of the owner role and of the credential roles. Refusing covers
// every credential not yet Deleted (a Creating or Deleting one too); allowing covers the Active
// ones only. Only roles carrying their credential's mark are touched. Every step is repeatable.
func (p *Provisioner) setLogin(ctx context.Context, tx bun.IDB, id int64, enabled bool) error {
	inst, engine, err := p.load(ctx, tx, id)
	if err != nil {
		return err
	}
	ectx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	op := map[bool]string{true: "resume", false: "pause"}[enabled]
	owner := func() error { return ownerLogins(ectx, tx, engine, inst, enabled) }
	creds := func() error { return setCredentialsLogin(ectx, tx, engine, inst, enabled) }
	// Pausing refuses the credentials first: the owner's step then closes the database to every
	// other role (PostgreSQL revokes CONNECT), after the credentials' roles were checked and marked.
	steps := []func() error{owner, creds}
	if !enabled {
		steps = []func() error{creds, owner}
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return engineError(ctx, p.log, op, inst.ID, err)
		}
	}
	status := StatusPaused
	if enabled {
		status = StatusActive
	}
	_, err = provision.Succeed(tx.NewUpdate().Model(inst), status).Where("status IN (?)", bun.In(slices.Collect(maps.Keys(p.Between)))).
		WherePK().Exec(ctx)
	return err
}

// setCredentialsLogin allows (Active credentials) or refuses (every credential not Deleted) the
// logins of the credential roles of database inst.
func setCredentialsLogin(ctx context.Context, tx bun.IDB, engine Engine, inst *Instance, enabled bool) error {
	id := inst.ID
	var creds []Credential
	q := tx.NewSelect().Model(&creds).Where("database_instance_id = ?", id)
	if enabled {
		q = q.Where("status = ?", CredentialActive)
	} else {
		q = q.Where("status <> ?", CredentialDeleted)
	}
	if err := q.OrderExpr("id").Scan(ctx); err != nil {
		return fmt.Errorf("list credentials of database %d: %w", id, err)
	}
	for _, c := range creds {
		if err := engine.SetUserLogin(ctx, inst.DatabaseName, c.Username, CredentialMarker(c.ID, c.MarkerToken), enabled); err != nil && !errors.Is(err, ErrRoleTaken) {
			return fmt.Errorf("set login of credential %d on %s: %w", c.ID, engine.ID(), err)
		}
	}
	return nil
}

var _ provision.Suspender = (*Provisioner)(nil)
