package databases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"provisioner/platform/db"
)

// roleMark tells whether role exists and the mark (its comment) it carries.
func (e *postgresEngine) roleMark(ctx context.Context, role string) (bool, string, error) {
	var mark string
	err := e.pool.QueryRowContext(ctx,
		"SELECT coalesce(pg_catalog.shobj_description(oid, 'pg_authid'), '') FROM pg_catalog.pg_roles WHERE rolname = $1", role).Scan(&mark)
	if errors.Is(err, sql.ErrNoRows) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("postgres: %w", err)
	}
	return true, mark, nil
}

// credentialRole tells whether role user exists; ErrRoleTaken when it was not made for marker's
// credential. An unmarked role is adopted (and marked) only with exactly an old credential role's
// footprint: LOGIN and nothing more, CONNECT on dbName only, owning nothing, a member of dbName's
// login role alone, with no member.
func (e *postgresEngine) credentialRole(ctx context.Context, dbName, user, marker string) (bool, error) {
	ok, mark, err := e.roleMark(ctx, user)
	if err != nil || !ok {
		return false, err
	}
	if mark == marker {
		return true, nil
	}
	if mark != "" {
		return false, ErrRoleTaken
	}
	var legacy bool
	err = e.pool.QueryRowContext(ctx, `
		SELECT EXISTS (
			SELECT 1 FROM pg_catalog.pg_roles r, pg_catalog.pg_database d
			WHERE r.rolname = $1 AND d.datname = $2
			  AND r.rolcanlogin AND NOT (r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls)
			  AND pg_catalog.shobj_description(r.oid, 'pg_authid') IS NULL
			  AND EXISTS (SELECT 1 FROM pg_catalog.aclexplode(d.datacl) a WHERE a.grantee = r.oid AND a.privilege_type = 'CONNECT')
			  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_shdepend s
			                  WHERE s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND s.refobjid = r.oid
			                    AND s.dbid <> d.oid
			                    AND NOT (s.dbid = 0 AND s.classid = 'pg_catalog.pg_database'::pg_catalog.regclass AND s.objid = d.oid AND s.deptype = 'a'))
			  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m WHERE m.roleid = r.oid)
			  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid
			                  WHERE m.member = r.oid AND g.rolname <> $2))`, user, dbName).Scan(&legacy)
	if err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	if !legacy {
		return false, ErrRoleTaken
	}
	if err := e.exec(ctx, fmt.Sprintf("COMMENT ON ROLE %s IS %s", qi(user), ql(marker))); err != nil {
		return false, err
	}
	return true, nil
}

func (e *postgresEngine) RoleExists(ctx context.Context, role string) (bool, error) {
	ok, _, err := e.roleMark(ctx, role)
	return ok, err
}

// ensureMarkedRole creates role with its mark in one transaction, or adopts it (setting the
// password) when it already carries marker; any other role of that name is ErrRoleTaken.
func (e *postgresEngine) ensureMarkedRole(ctx context.Context, role, password, marker string) error {
	for attempt := 0; ; attempt++ {
		ok, mark, err := e.roleMark(ctx, role)
		if err != nil {
			return err
		}
		if ok {
			if mark != marker {
				return ErrRoleTaken
			}
			return e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH LOGIN PASSWORD %s%s", qi(role), ql(password), e.limit))
		}
		err = e.inTx(ctx,
			fmt.Sprintf("CREATE ROLE %s WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %s%s", qi(role), ql(password), e.limit),
			fmt.Sprintf("COMMENT ON ROLE %s IS %s", qi(role), ql(marker)))
		if db.IsCode(err, "42710") && attempt == 0 { // created concurrently: look at its mark again
			continue
		}
		return err
	}
}

// inTx runs stmts in one transaction on the admin connection.
func (e *postgresEngine) inTx(ctx context.Context, stmts ...string) error {
	tx, err := e.pool.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("postgres: %s: %w", redactStmt(s), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return nil
}

func (e *postgresEngine) CreateUser(ctx context.Context, dbName, owner, user, password string, readOnly bool, marker string) error {
	if err := checkNames(dbName, owner, user); err != nil {
		return err
	}
	// Concurrent GRANTs on the database and its schema public fail (see dbLocks).
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	if err := e.ensureMarkedRole(ctx, user, password, marker); err != nil {
		return err
	}
	if err := e.exec(ctx, fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", qi(dbName), qi(user))); err != nil {
		return err
	}
	if !readOnly {
		// Full access: the credential acts with the owner's privileges.
		return e.exec(ctx, fmt.Sprintf("GRANT %s TO %s", qi(owner), qi(user)))
	}
	t, err := e.tenant(ctx, dbName)
	if err != nil {
		return err
	}
	tx, err := t.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck
	// Creating a large object is open to PUBLIC by default, and a read-only role that switches
	// its session's read-only setting off would write through one (lo_from_bytea). It becomes
	// the login role's alone (full-access credentials have it through their membership), unless
	// the database is over its quota now (it belongs to the quota holder then; SetReadOnly gives
	// it back when it is writable).
	var writable bool
	if err := tx.QueryRowContext(ctx, `SELECT d.datdba = r.oid FROM pg_catalog.pg_database d, pg_catalog.pg_roles r
		WHERE d.datname = pg_catalog.current_database() AND r.rolname = $1`, owner).Scan(&writable); err != nil {
		return fmt.Errorf("postgres: owner of %s: %w", dbName, err)
	}
	stmts := []string{
		fmt.Sprintf("GRANT USAGE ON SCHEMA public TO %s", qi(user)),
		fmt.Sprintf("GRANT SELECT ON ALL TABLES IN SCHEMA public TO %s", qi(user)),
		fmt.Sprintf("ALTER DEFAULT PRIVILEGES FOR ROLE %s IN SCHEMA public GRANT SELECT ON TABLES TO %s", qi(owner), qi(user)),
		fmt.Sprintf("ALTER ROLE %s SET default_transaction_read_only = on", qi(user)),
		"REVOKE EXECUTE ON " + loCreators + " FROM PUBLIC",
	}
	if writable {
		stmts = append(stmts, fmt.Sprintf("GRANT EXECUTE ON %s TO %s", loCreators, qi(owner)))
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("postgres: %s: %w", s, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return nil
}

// loCreators are the functions that create a large object (EXECUTE granted to PUBLIC by
// default; lo_import on the server needs a superuser). Writing into an existing one needs
// UPDATE on it, which only its owner has.
const loCreators = "FUNCTION pg_catalog.lo_creat(integer), pg_catalog.lo_create(oid), pg_catalog.lo_from_bytea(oid, bytea)"

func (e *postgresEngine) SetPassword(ctx context.Context, dbName, user, password, marker string) error {
	if err := checkNames(dbName, user); err != nil {
		return err
	}
	ok, err := e.credentialRole(ctx, dbName, user, marker)
	if err != nil {
		return err
	}
	if !ok {
		return ErrRoleTaken
	}
	return e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH PASSWORD %s%s", qi(user), ql(password), e.limit))
}

func (e *postgresEngine) SetUserLogin(ctx context.Context, dbName, user, marker string, enabled bool) error {
	if err := checkNames(dbName, user); err != nil {
		return err
	}
	ok, err := e.credentialRole(ctx, dbName, user, marker)
	if err != nil || !ok {
		return err
	}
	login := "NOLOGIN"
	if enabled {
		login = "LOGIN" + e.limit
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH %s", qi(user), login)); err != nil {
		if db.IsCode(err, "42704") { // dropped meanwhile
			return nil
		}
		return err
	}
	if enabled {
		// A pause revoked it (see SetLogin).
		err := e.grantConnect(ctx, dbName, user)
		if db.IsCode(err, "42704") {
			return nil
		}
		return err
	}
	return e.terminate(ctx, "usename = $1", user)
}

// DropUser removes a credential's role. Its logins are refused and sessions ended first; what it
// owns in the tenant database (the tenant's data) goes to the database's current owner, then DROP
// OWNED BY revokes only its privileges (dropRole), and the role is dropped.
func (e *postgresEngine) DropUser(ctx context.Context, dbName, user, marker string) error {
	if err := checkNames(dbName, user); err != nil {
		return err
	}
	// Concurrent DROP OWNED BY revokes on the same rows fail (see dbLocks).
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	ok, err := e.credentialRole(ctx, dbName, user, marker) // never drop, or strip, a role this credential did not make
	if err != nil || !ok {
		return err
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH NOLOGIN", qi(user))); err != nil {
		if db.IsCode(err, "42704") { // dropped meanwhile
			return nil
		}
		return err
	}
	if err := e.terminate(ctx, "usename = $1", user); err != nil {
		return err
	}
	return e.dropRole(ctx, user)
}
