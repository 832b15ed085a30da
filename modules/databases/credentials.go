package databases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/authn"
	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/paging"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// Credentials manages access credentials: extra login roles on tenant databases. The row is
// stored (Creating) before the engine is asked, and marked Active after; a failed engine call
// drops the role and marks the row Deleted again, so nothing half-written is listed for long. A
// delete is stored (Deleting) before the engine is asked. What a crash or a failed call leaves
// in-between, the finisher finishes (CredentialProvisioner).
type Credentials struct {
	db       *bun.DB
	svc      *Service
	engines  *Engines
	sealer   *secrets.Sealer
	audit    *audit.Recorder
	finisher *provision.Finisher
}

func (c *Credentials) view(cr *Credential) CredentialView {
	return CredentialView{ID: cr.ID, DatabaseInstanceID: cr.DatabaseInstanceID, Username: cr.Username,
		ReadOnly: cr.ReadOnly, Status: cr.Status, CreatedAt: cr.CreatedAt.UTC(), UpdatedAt: cr.UpdatedAt.UTC()}
}

func aad(username string) string { return "credential:" + username }

// List pages through credentials, optionally of one database.
func (c *Credentials) List(ctx context.Context, dbID int64, q paging.PageQuery) (paging.Page[CredentialView], error) {
	var rows []Credential
	sel := c.db.NewSelect().Model(&rows).Where("status <> ?", CredentialDeleted)
	if dbID > 0 {
		sel = sel.Where("database_instance_id = ?", dbID)
	}
	total, exact, err := db.Page(ctx, sel, &rows, "id DESC", q)
	if err != nil {
		return paging.Page[CredentialView]{}, fmt.Errorf("list credentials: %w", err)
	}
	out := make([]CredentialView, len(rows))
	for i := range rows {
		out[i] = c.view(&rows[i])
	}
	return paging.NewPage(q, out, total).Counted(exact), nil
}

// Get returns one live credential (never its password).
func (c *Credentials) Get(ctx context.Context, id int64) (*Credential, error) {
	cr, err := provision.Find[Credential](ctx, c.db, id, msgCredentialNotFound)
	if err == nil && cr.Status == CredentialDeleted {
		return nil, fault.NotFound(msgCredentialNotFound)
	}
	return cr, err
}

// Create adds a login role on the database; the password is in the answer only.
func (c *Credentials) Create(ctx context.Context, dbID int64, username string, readOnly bool) (*CredentialView, error) {
	inst, err := c.svc.get(ctx, dbID, 0)
	if err != nil {
		return nil, err
	}
	if inst.Status != StatusActive && inst.Status != StatusPaused {
		return nil, fault.Conflict(fmt.Sprintf("Database is %s; credentials can be added to Active or Paused databases", apiStatus(inst.Status)))
	}
	engine := c.engines.Get(inst.Engine)
	if engine == nil {
		return nil, fault.Unavailable("The database's engine is not configured")
	}
	if username == "" {
		username = inst.DatabaseName + "_" + strings.ToLower(secrets.RandomString(6))
	} else if err := c.usernameFree(ctx, engine, username); err != nil {
		return nil, err
	}
	password := secrets.RandomPassword()
	sealed, err := c.sealer.Seal([]byte(password), aad(username))
	if err != nil {
		return nil, err
	}
	release, err := c.svc.waits.acquire(ctx) // make holds the row's transaction while the engine answers
	if err != nil {
		return nil, err
	}
	defer release()
	cr := &Credential{DatabaseInstanceID: inst.ID, Username: username, PasswordSealed: sealed, ReadOnly: readOnly,
		rowState: rowState{Status: CredentialCreating, Retries: provision.Retries{NextAttemptAt: time.Now().Add(provision.RequestGrace)}}}
	if err := db.RunInTx(ctx, c.db, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(cr).Returning("*").Exec(ctx); err != nil {
			if db.IsUniqueViolation(err) {
				return fault.Conflict("This username is taken")
			}
			return fmt.Errorf("store credential: %w", err)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := c.make(ctx, inst, engine, cr, password); err != nil {
		return nil, err
	}
	c.auditTry(ctx, "access_credential.created", inst, cr)
	v := c.view(cr)
	v.Password = password
	v.ConnectionString = engine.ConnectionString(inst.DatabaseName, username, password)
	return &v, nil
}

// make asks the engine for the role of the stored Creating row cr and marks it Active, holding
// the row's lock meanwhile (the finisher skips locked rows). When the engine fails, the role is
// dropped and the row marked Deleted at once, or Deleting for the finisher when the drop fails
// too. The database writes outlive a client that hangs up.
func (c *Credentials) make(ctx context.Context, inst *Instance, engine Engine, cr *Credential, password string) error {
	dctx := context.WithoutCancel(ctx)
	tx, err := c.db.BeginTx(dctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// The caller first, as every write of a request (db.RunInTx): an admin deleted or demoted
	// since the row was stored makes nothing on the engine, and the row is undone below.
	callerErr := authn.LockCaller(dctx, tx)
	var callerRefused interface{ GetStatus() int } // an answer to the caller, not a failure
	if callerErr != nil && !errors.As(callerErr, &callerRefused) {
		return callerErr
	}
	if err := tx.NewSelect().Model(cr).WherePK().Where("status = ?", CredentialCreating).For("UPDATE").Scan(dctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) { // deleted before it was made: nothing is on the engine
			return fault.Conflict("The credential was deleted before it was made")
		}
		return fmt.Errorf("lock credential %d: %w", cr.ID, err)
	}
	// The database's row, shared: no pause or resume runs meanwhile (theirs is 409), and none
	// started since the status was read. A refused lock (55P03, the row is being changed) aborts
	// the transaction: the savepoint keeps it usable for the undo below, so the answer is 409 and
	// the row is Deleted at once.
	if _, err := tx.ExecContext(dctx, "SAVEPOINT lock_database"); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	cur, err := lockInstanceShared(dctx, tx, inst.ID)
	if err != nil {
		if _, rerr := tx.ExecContext(dctx, "ROLLBACK TO SAVEPOINT lock_database"); rerr != nil {
			return fmt.Errorf("roll back to savepoint: %w", rerr)
		}
	}
	if err == nil {
		err = callerErr
	}
	if err == nil && cur.Status != StatusActive && cur.Status != StatusPaused {
		err = fault.Conflict(fmt.Sprintf("Database is %s; credentials can be added to Active or Paused databases", cur.Status))
	}
	if err != nil {
		if _, uerr := provision.Move(tx.NewUpdate().Model(cr), CredentialDeleted).WherePK().Exec(dctx); uerr != nil {
			return fmt.Errorf("record credential %d undone: %w", cr.ID, uerr)
		}
		if cerr := tx.Commit(); cerr != nil {
			return fmt.Errorf("commit credential %d undone: %w", cr.ID, cerr)
		}
		return err
	}
	ectx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	cerr := engine.CreateUser(ectx, inst.DatabaseName, inst.DatabaseUser, cr.Username, password, cr.ReadOnly, CredentialMarker(cr.ID, cr.MarkerToken))
	if cerr == nil && cur.Status == StatusPaused {
		// A paused database lets no credential in: the role is made login-blocked, and resume
		// allows it with the other Active ones.
		cerr = engine.SetUserLogin(ectx, inst.DatabaseName, cr.Username, CredentialMarker(cr.ID, cr.MarkerToken), false)
	}
	if cerr != nil {
		c.logEngine(ctx, "create", cr, cerr)
		// Undone at once: DropUser removes only a role this credential made; when the name was
		// taken (ErrRoleTaken) nothing was made and the engine is not asked again. When the
		// engine cannot say whether the role was made (a timeout, an outage), the credential is
		// Deleting: the finisher drops it once the engine answers.
		if errors.Is(cerr, ErrRoleTaken) {
			if _, err := provision.Move(tx.NewUpdate().Model(cr), CredentialDeleted).WherePK().Exec(dctx); err != nil {
				return fmt.Errorf("record credential %d undone: %w", cr.ID, err)
			}
		} else if derr := dropCredential(dctx, tx, c.engines, cr); derr != nil {
			if _, err := provision.Attempted(provision.Nudge(provision.Move(tx.NewUpdate().Model(cr), CredentialDeleting)), derr).
				WherePK().Exec(dctx); err != nil {
				return fmt.Errorf("record credential %d undo: %w", cr.ID, err)
			}
		}
		if err := tx.Commit(); err != nil {
			return fmt.Errorf("commit credential %d undo: %w", cr.ID, err)
		}
		if errors.Is(cerr, ErrRoleTaken) {
			return fault.Conflict("This username is taken on the database engine")
		}
		return fault.Upstream("The database engine refused the credential", nil)
	}
	if _, err := provision.Succeed(tx.NewUpdate().Model(cr), CredentialActive).WherePK().Returning("*").Exec(dctx); err != nil {
		return fmt.Errorf("record credential: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit credential %d: %w", cr.ID, err)
	}
	return nil
}

// reservedPrefixes and reservedNames are role and user names of the engines themselves and of
// hosting platforms; a credential never takes one.
var (
	reservedPrefixes = []string{"pg_", "mysql", "mariadb", "rds", "azure", "cloudsql", "provisioner"}
	reservedNames    = map[string]bool{"postgres": true, "root": true, "public": true, "none": true, "all": true,
		"admin": true, "sys": true, "user": true, "current_user": true, "current_role": true, "session_user": true,
		"template0": true, "template1": true, "information_schema": true, "performance_schema": true, "replication": true}
)

// reservedUsername tells whether name belongs to an engine or platform.
func reservedUsername(name string) bool {
	if reservedNames[name] {
		return true
	}
	if strings.HasSuffix(name, "_quota") || strings.HasSuffix(name, secondLoginSuffix) { // quota holders, second logins
		return true
	}
	for _, p := range reservedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// usernameFree refuses (409, before anything is written) a name that is reserved, is a tenant
// database's name or owner, or exists on the engine already: the engine would otherwise adopt
// that role, reset its password and, on failure, strip it.
func (c *Credentials) usernameFree(ctx context.Context, engine Engine, username string) error {
	if reservedUsername(username) {
		return fault.Conflict("This username is reserved")
	}
	n, err := c.db.NewSelect().Model((*Instance)(nil)).
		Where("database_name = ? OR database_user = ?", username, username).Count(ctx)
	if err != nil {
		return fmt.Errorf("check credential username: %w", err)
	}
	if n > 0 {
		return fault.Conflict("This username is a tenant database's name")
	}
	ectx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	exists, err := engine.RoleExists(ectx, username)
	if err != nil {
		return fault.Upstream("The database engine did not answer", nil)
	}
	if exists {
		return fault.Conflict("This username is taken on the database engine")
	}
	return nil
}

func credentialEvent(action string, inst *Instance, cr *Credential) audit.Event {
	return audit.Event{Action: action, UserID: audit.Int64(inst.UserID), TargetType: "accessCredential",
		TargetID: fmt.Sprint(cr.ID), Details: map[string]any{"databaseInstanceId": inst.ID, "username": cr.Username, "readOnly": cr.ReadOnly}}
}

func (c *Credentials) auditTry(ctx context.Context, action string, inst *Instance, cr *Credential) {
	_ = c.audit.Record(ctx, credentialEvent(action, inst, cr))
}

// logEngine logs an engine's refusal of a credential change: the full error, which the answer
// never carries. Engine errors name statements with their passwords redacted.
func (c *Credentials) logEngine(ctx context.Context, op string, cr *Credential, err error) {
	c.svc.log.WarnContext(ctx, "database engine refused a credential change", "op", op, "credential", cr.ID,
		"username", cr.Username, "error", err.Error())
}

// errCredentialBusy is the 409 of a request on a credential another request or the finisher is
// changing; msgCredentialNotFound its 404.
const (
	errCredentialBusy     = "The access credential is being changed; try again"
	msgCredentialNotFound = "Access credential not found"
)

// lockCredential locks a live credential's row for a change, without waiting (provision.LockNow).
func lockCredential(ctx context.Context, tx bun.Tx, id int64) (*Credential, error) {
	return provision.LockNow[Credential](ctx, tx, id, 0, "UPDATE", msgCredentialNotFound, errCredentialBusy, CredentialDeleted)
}

// lockInstanceShared locks a live database's row shared, without waiting (provision.LockNow):
// credential changes run side by side, a pause, resume or delete of the database (which locks it
// for update) does not.
func lockInstanceShared(ctx context.Context, tx bun.Tx, id int64) (*Instance, error) {
	return provision.LockNow[Instance](ctx, tx, id, 0, "SHARE", msgNotFound, errDatabaseBusy, StatusDeleted)
}

// Rotate sets a new password; it is in the answer only. The credential's row is locked while
// the engine is asked, so rotations (and deletes) of one credential never overlap: a second one
// meanwhile answers 409. A credential of a paused database stays login-blocked.
func (c *Credentials) Rotate(ctx context.Context, id int64) (*CredentialView, error) {
	release, err := c.svc.waits.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var out *CredentialView
	err = db.RunInTx(ctx, c.db, func(ctx context.Context, tx bun.Tx) error {
		cr, err := lockCredential(ctx, tx, id)
		if err != nil {
			return err
		}
		if cr.Status != CredentialActive {
			return fault.Conflict(fmt.Sprintf("Access credential is %s; only an Active one can be rotated", cr.Status))
		}
		inst, err := lockInstanceShared(ctx, tx, cr.DatabaseInstanceID)
		if err != nil {
			return err
		}
		engine := c.engines.Get(inst.Engine)
		if engine == nil {
			return fault.Unavailable("The database's engine is not configured")
		}
		password := secrets.RandomPassword()
		sealed, err := c.sealer.Seal([]byte(password), aad(cr.Username))
		if err != nil {
			return err
		}
		ectx, cancel := context.WithTimeout(ctx, engineTimeout)
		defer cancel()
		if err := engine.SetPassword(ectx, inst.DatabaseName, cr.Username, password, CredentialMarker(cr.ID, cr.MarkerToken)); err != nil {
			if errors.Is(err, ErrRoleTaken) {
				return fault.Conflict("The credential's role on the engine was not made by this service (or is gone); its password is left alone")
			}
			c.logEngine(ctx, "rotate", cr, err)
			return fault.Upstream("The database engine refused the new password; the old one still works", nil)
		}
		if _, err := tx.NewUpdate().Model(cr).Set("password_sealed = ?", sealed).Set("updated_at = now()").WherePK().Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("record rotated credential: %w", err)
		}
		if err := c.audit.RecordTx(ctx, tx, credentialEvent("access_credential.rotated", inst, cr)); err != nil {
			return err
		}
		v := c.view(cr)
		v.Password = password
		v.ConnectionString = engine.ConnectionString(inst.DatabaseName, cr.Username, password)
		out = &v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Delete stores the intent (Deleting), then drops the role on the engine and marks the row
// Deleted through the finisher's claim. It returns the credential as it then stands and the
// outcome: Pending (Deleting) when the engine failed, which the finisher retries, and so does a
// second DELETE. A DELETE while another request's is still under way is 409 (deleteInProgress).
func (c *Credentials) Delete(ctx context.Context, id int64) (*Credential, provision.Outcome, error) {
	release, err := c.svc.waits.acquire(ctx)
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	defer release()
	err = db.RunInTx(ctx, c.db, func(ctx context.Context, tx bun.Tx) error {
		// A create, rotation or delete in progress holds the row's lock: 409 at once.
		cr, err := lockCredential(ctx, tx, id)
		if err != nil {
			return err
		}
		if cr.Status == CredentialDeleting {
			return deleteInProgress(cr.Retries, errCredentialBusy)
		}
		inst, err := provision.Load[Instance](ctx, tx, cr.DatabaseInstanceID)
		if err != nil {
			return err
		}
		if _, err := provision.Restart(tx.NewUpdate().Model(cr), CredentialDeleting, time.Now().Add(deleteLease)).WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("mark credential %d deleting: %w", id, err)
		}
		return c.audit.RecordTx(ctx, tx, credentialEvent("access_credential.deleted", inst, cr))
	})
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	return provision.Run[Credential](ctx, c.finisher, c.db, credentialSpec, id, provision.Again)
}
