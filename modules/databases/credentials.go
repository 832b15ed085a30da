package databases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/secrets"
)

// Credentials manages access credentials: extra login roles on tenant databases. The row is
// stored (Creating) before the engine is asked, and marked Active after; a failed engine call
// removes the row again, so nothing half-written is listed.
type Credentials struct {
	db      *bun.DB
	svc     *Service
	engines *Engines
	sealer  *secrets.Sealer
	audit   *audit.Recorder
}

func (c *Credentials) view(cr *Credential) CredentialView {
	return CredentialView{ID: cr.ID, DatabaseInstanceID: cr.DatabaseInstanceID, Username: cr.Username,
		ReadOnly: cr.ReadOnly, Status: cr.Status, CreatedAt: cr.CreatedAt.UTC(), UpdatedAt: cr.UpdatedAt.UTC()}
}

func aad(username string) string { return "credential:" + username }

// List pages through credentials, optionally of one database.
func (c *Credentials) List(ctx context.Context, dbID int64, q httpx.PageQuery) (httpx.Page[CredentialView], error) {
	var rows []Credential
	sel := c.db.NewSelect().Model(&rows).Where("status <> 'Deleted'")
	if dbID > 0 {
		sel = sel.Where("database_instance_id = ?", dbID)
	}
	total, err := sel.OrderExpr("id DESC").Limit(q.Limit()).Offset(q.Offset()).ScanAndCount(ctx)
	if err != nil {
		return httpx.Page[CredentialView]{}, fmt.Errorf("list credentials: %w", err)
	}
	out := make([]CredentialView, len(rows))
	for i := range rows {
		out[i] = c.view(&rows[i])
	}
	return httpx.NewPage(q, out, total), nil
}

// Get returns one live credential (never its password).
func (c *Credentials) Get(ctx context.Context, id int64) (*Credential, error) {
	cr := new(Credential)
	if err := c.db.NewSelect().Model(cr).Where("id = ?", id).Where("status <> 'Deleted'").Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, httpx.NotFound("Access credential not found")
		}
		return nil, fmt.Errorf("get credential %d: %w", id, err)
	}
	return cr, nil
}

// Create adds a login role on the database; the password is in the answer only.
func (c *Credentials) Create(ctx context.Context, dbID int64, username string, readOnly bool) (*CredentialView, error) {
	inst, err := c.svc.get(ctx, c.db, dbID, 0)
	if err != nil {
		return nil, err
	}
	if inst.Status != StatusActive && inst.Status != StatusPaused {
		return nil, httpx.Conflict(fmt.Sprintf("Database is %s; credentials can be added to Active or Paused databases", inst.Status))
	}
	engine := c.engines.Get(inst.Engine)
	if engine == nil {
		return nil, httpx.Unavailable("The database's engine is not configured")
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
	cr := &Credential{DatabaseInstanceID: inst.ID, Username: username, PasswordSealed: sealed, ReadOnly: readOnly, Status: "Creating"}
	if _, err := c.db.NewInsert().Model(cr).Returning("*").Exec(ctx); err != nil {
		if db.IsUniqueViolation(err) {
			return nil, httpx.Conflict("This username is taken")
		}
		return nil, fmt.Errorf("store credential: %w", err)
	}
	ectx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	marker := CredentialMarker(cr.ID)
	if err := engine.CreateUser(ectx, inst.DatabaseName, inst.DatabaseUser, username, password, readOnly, marker); err != nil {
		// DropUser removes only a role this credential made: never the one that took the name.
		_ = engine.DropUser(context.WithoutCancel(ctx), inst.DatabaseName, username, marker)
		_, _ = c.db.NewDelete().Model(cr).WherePK().Exec(context.WithoutCancel(ctx))
		if errors.Is(err, ErrRoleTaken) {
			return nil, httpx.Conflict("This username is taken on the database engine")
		}
		return nil, httpx.BadGateway("The database engine refused the credential", nil)
	}
	if _, err := c.db.NewUpdate().Model(cr).Set("status = 'Active'").Set("updated_at = now()").WherePK().Returning("*").Exec(ctx); err != nil {
		return nil, fmt.Errorf("record credential: %w", err)
	}
	c.auditTry(ctx, "access_credential.created", inst, cr)
	v := c.view(cr)
	v.Password = password
	v.ConnectionString = engine.ConnectionString(inst.DatabaseName, username, password)
	return &v, nil
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
	if strings.HasSuffix(name, "_quota") { // the PostgreSQL engine's quota holders
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
		return httpx.Conflict("This username is reserved")
	}
	n, err := c.db.NewSelect().Model((*Instance)(nil)).
		Where("database_name = ? OR database_user = ?", username, username).Count(ctx)
	if err != nil {
		return fmt.Errorf("check credential username: %w", err)
	}
	if n > 0 {
		return httpx.Conflict("This username is a tenant database's name")
	}
	ectx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	exists, err := engine.RoleExists(ectx, username)
	if err != nil {
		return httpx.BadGateway("The database engine did not answer", nil)
	}
	if exists {
		return httpx.Conflict("This username is taken on the database engine")
	}
	return nil
}

func (c *Credentials) auditTry(ctx context.Context, action string, inst *Instance, cr *Credential) {
	_ = c.audit.Record(ctx, audit.Event{Action: action, UserID: audit.Int64(inst.UserID), TargetType: "accessCredential",
		TargetID: fmt.Sprint(cr.ID), Details: map[string]any{"databaseInstanceId": inst.ID, "username": cr.Username, "readOnly": cr.ReadOnly}})
}

// Rotate sets a new password; it is in the answer only.
func (c *Credentials) Rotate(ctx context.Context, id int64) (*CredentialView, error) {
	cr, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	inst, err := c.svc.get(ctx, c.db, cr.DatabaseInstanceID, 0)
	if err != nil {
		return nil, err
	}
	engine := c.engines.Get(inst.Engine)
	if engine == nil {
		return nil, httpx.Unavailable("The database's engine is not configured")
	}
	password := secrets.RandomPassword()
	sealed, err := c.sealer.Seal([]byte(password), aad(cr.Username))
	if err != nil {
		return nil, err
	}
	ectx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	if err := engine.SetPassword(ectx, cr.Username, password, CredentialMarker(cr.ID)); err != nil {
		if errors.Is(err, ErrRoleTaken) {
			return nil, httpx.Conflict("The credential's role on the engine was not made by this service (or is gone); its password is left alone")
		}
		return nil, httpx.BadGateway("The database engine refused the new password; the old one still works", nil)
	}
	if _, err := c.db.NewUpdate().Model(cr).Set("password_sealed = ?", sealed).Set("updated_at = now()").WherePK().Returning("*").Exec(ctx); err != nil {
		return nil, fmt.Errorf("record rotated credential: %w", err)
	}
	c.auditTry(ctx, "access_credential.rotated", inst, cr)
	v := c.view(cr)
	v.Password = password
	v.ConnectionString = engine.ConnectionString(inst.DatabaseName, cr.Username, password)
	return &v, nil
}

// Delete drops the role on the engine and the row.
func (c *Credentials) Delete(ctx context.Context, id int64) error {
	cr, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	inst := new(Instance)
	if err := c.db.NewSelect().Model(inst).Where("id = ?", cr.DatabaseInstanceID).Scan(ctx); err != nil {
		return fmt.Errorf("load database of credential %d: %w", id, err)
	}
	if engine := c.engines.Get(inst.Engine); engine != nil && inst.Status != StatusDeleted {
		ectx, cancel := context.WithTimeout(ctx, engineTimeout)
		defer cancel()
		// A role not made for this credential (ErrRoleTaken) is left alone; the row goes.
		if err := engine.DropUser(ectx, inst.DatabaseName, cr.Username, CredentialMarker(cr.ID)); err != nil && !errors.Is(err, ErrRoleTaken) {
			return httpx.BadGateway("The database engine refused to drop the credential", c.view(cr))
		}
	}
	if _, err := c.db.NewUpdate().Model(cr).Set("status = 'Deleted'").Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("delete credential %d: %w", id, err)
	}
	c.auditTry(ctx, "access_credential.deleted", inst, cr)
	return nil
}
