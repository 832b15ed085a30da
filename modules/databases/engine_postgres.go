package databases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"provisioner/platform/db"
)

// postgresEngine hosts tenant databases on a PostgreSQL server through an admin connection.
type postgresEngine struct {
	admin *url.URL
	pool  *sql.DB
	host  string
	port  int

	mu  sync.Mutex
	per map[string]*sql.DB // admin connections into tenant databases (read-only grants)
	// lockedDown: the cluster's own databases no longer let PUBLIC connect (see lockDown).
	lockedDown bool
	// shapedPublic: the server is PostgreSQL 15 or newer, whose template gives every new database
	// the schema public ownPublicSchema makes (read once, with lockDown).
	shapedPublic bool
	// version: server_version_num (0: not read yet).
	version int
	// connLimit is every tenant login role's CONNECTION LIMIT (-1: none); limit is the clause.
	connLimit int
	limit     string
	// limitsSet: the roles of the databases the first usage refresh named have connLimit.
	limitsSet bool
	// locks serialise catalogue changes per tenant database (see dbLocks).
	locks *dbLocks
}

// pinnedSettings are startup parameters of every admin session the engine opens. A tenant owns
// its database and may ALTER DATABASE … SET almost any setting there, which every later session
// in it, the admin's (a superuser) included, starts with, unless the client sends the setting in
// its startup packet: that source ranks above the database's and the role's defaults. Pinned:
// search_path (else a tenant's public.pg_roles view, or a function shadowing a pg_catalog one,
// runs its code as the superuser; pg_temp last so the session's temporary schema is never
// searched first), role (a database default of role = <tenant> would make the admin act as the
// tenant), read-only and isolation defaults, exit_on_error and standard_conforming_strings (how
// the service's statements behave), and local_preload_libraries (a library that does not exist
// refuses every session: the database could no longer be switched to read-only). The engine's SQL also names every catalogue object and
// function with its schema.
var pinnedSettings = [][2]string{
	{"search_path", "pg_catalog, pg_temp"},
	{"role", "none"},
	{"default_transaction_read_only", "off"},
	{"default_transaction_isolation", "read committed"},
	{"default_transaction_deferrable", "off"},
	{"exit_on_error", "off"},
	{"standard_conforming_strings", "on"},
	{"local_preload_libraries", ""},
}

// pinnedTimeouts are pinned the same way unless the admin URL sets them itself: a tenant's
// statement_timeout = '1ms' on its database would otherwise make every switch to read-only fail,
// keeping it writable over its quota. minVersion: the server must know the setting (an unknown
// one refuses the connection).
var pinnedTimeouts = []struct {
	name       string
	minVersion int
}{
	{"statement_timeout", 0},
	{"lock_timeout", 0},
	{"idle_in_transaction_session_timeout", 0},
	{"idle_session_timeout", 140000},
	{"transaction_timeout", 170000},
}

// pinned returns u with the pinned settings for a server of version (server_version_num; 0:
// unknown, only the settings every supported version has).
func pinned(u url.URL, version int) url.URL {
	q := u.Query()
	for _, kv := range pinnedSettings {
		q.Set(kv[0], kv[1])
	}
	for _, t := range pinnedTimeouts {
		if t.minVersion <= version && !q.Has(t.name) {
			q.Set(t.name, "0")
		}
	}
	// pgx reads a '+' in the query as itself, not as a space.
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
	return u
}

func newPostgres(dsn string, pub EnginePublic, maxConns int) (*postgresEngine, error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		return nil, errors.New("not a postgres:// URL")
	}
	pu := pinned(*u, 0)
	conn, err := db.Connector(pu.String())
	if err != nil {
		return nil, err
	}
	pool := sql.OpenDB(conn)
	pool.SetMaxOpenConns(8)
	e := &postgresEngine{admin: u, pool: pool, host: u.Hostname(), port: 5432, per: map[string]*sql.DB{}, connLimit: -1,
		locks: newDBLocks(sql.OpenDB(conn))}
	if maxConns > 0 {
		e.connLimit = maxConns
	}
	e.limit = fmt.Sprintf(" CONNECTION LIMIT %d", e.connLimit)
	if p, err := strconv.Atoi(u.Port()); err == nil {
		e.port = p
	}
	if pub.PublicHost != "" {
		e.host = pub.PublicHost
	}
	if pub.PublicPort != 0 {
		e.port = pub.PublicPort
	}
	return e, nil
}

var _ Engine = (*postgresEngine)(nil)

func (e *postgresEngine) ID() string   { return "postgres" }
func (e *postgresEngine) Name() string { return "PostgreSQL" }
func (e *postgresEngine) Host() string { return e.host }
func (e *postgresEngine) Port() int    { return e.port }

func (e *postgresEngine) Close() error {
	e.mu.Lock()
	for _, p := range e.per {
		_ = p.Close()
	}
	e.mu.Unlock()
	_ = e.locks.pool.Close()
	return e.pool.Close()
}

func (e *postgresEngine) Version(ctx context.Context) (string, error) {
	var v string
	if err := e.pool.QueryRowContext(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", fmt.Errorf("postgres version: %w", err)
	}
	return strings.Fields(v)[0], nil
}

func qi(s string) string { return db.QuoteIdent(s) }

// ql quotes a string literal (passwords are generated alphanumerics; quoted anyway).
func ql(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (e *postgresEngine) exec(ctx context.Context, stmts ...string) error {
	for _, s := range stmts {
		if _, err := e.pool.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("postgres: %s: %w", redactStmt(s), err)
		}
	}
	return nil
}

// redactStmt keeps passwords out of errors and logs.
func redactStmt(s string) string {
	if i := strings.Index(strings.ToUpper(s), "PASSWORD"); i >= 0 {
		return s[:i] + "PASSWORD '…'"
	}
	return s
}

func (e *postgresEngine) exists(ctx context.Context, q, name string) (bool, error) {
	var one int
	err := e.pool.QueryRowContext(ctx, q, name).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("postgres: %w", err)
	}
	return true, nil
}

func (e *postgresEngine) ensureRole(ctx context.Context, role, password string) error {
	ok, err := e.exists(ctx, "SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1", role)
	if err != nil {
		return err
	}
	if ok {
		return e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH LOGIN PASSWORD %s%s", qi(role), ql(password), e.limit))
	}
	err = e.exec(ctx, fmt.Sprintf("CREATE ROLE %s WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD %s%s", qi(role), ql(password), e.limit))
	if db.IsCode(err, "42710") { // created concurrently
		return e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH LOGIN PASSWORD %s%s", qi(role), ql(password), e.limit))
	}
	return err
}

// clusterDatabases are the databases every PostgreSQL cluster has, which PUBLIC (so every tenant
// role) may connect to by default. From there a tenant could LISTEN, NOTIFY and read the
// catalogues; the control database, when it shares the cluster, revokes its own grant in its
// migrations.
var clusterDatabases = []string{"postgres", "template1"}

// lockDown revokes PUBLIC's CONNECT and TEMPORARY on the cluster's own databases, once per
// process (and again after a failure): a tenant role reaches its own database only.
func (e *postgresEngine) lockDown(ctx context.Context) error {
	e.mu.Lock()
	done := e.lockedDown
	e.mu.Unlock()
	if done {
		return nil
	}
	rows, err := e.pool.QueryContext(ctx, `SELECT datname FROM pg_catalog.pg_database
		WHERE datname = ANY($1::text[]) AND pg_catalog.has_database_privilege('public', datname, 'CONNECT')`,
		"{"+strings.Join(clusterDatabases, ",")+"}")
	if err != nil {
		return fmt.Errorf("postgres: list cluster databases: %w", err)
	}
	var open []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: list cluster databases: %w", err)
		}
		open = append(open, n)
	}
	rows.Close()
	for _, n := range open {
		if err := e.exec(ctx, fmt.Sprintf("REVOKE CONNECT, TEMPORARY ON DATABASE %s FROM PUBLIC", qi(n))); err != nil {
			return err
		}
	}
	version, err := e.serverVersion(ctx)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.lockedDown, e.shapedPublic = true, version >= 150000
	e.mu.Unlock()
	return nil
}

func (e *postgresEngine) Create(ctx context.Context, dbName, role, password string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if err := e.lockDown(ctx); err != nil {
		return err
	}
	if err := e.ensureRole(ctx, role, password); err != nil {
		return err
	}
	ok, err := e.exists(ctx, "SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1", dbName)
	if err != nil {
		return err
	}
	fresh := false
	if !ok {
		err := e.exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", qi(dbName), qi(role)))
		if err != nil && !db.IsCode(err, "42P04") {
			return err
		}
		fresh = err == nil
	}
	if err := e.exec(ctx,
		fmt.Sprintf("REVOKE ALL ON DATABASE %s FROM PUBLIC", qi(dbName)),
		fmt.Sprintf("GRANT CONNECT, TEMPORARY ON DATABASE %s TO %s", qi(dbName), qi(role))); err != nil {
		return err
	}
	e.mu.Lock()
	shaped := e.shapedPublic
	e.mu.Unlock()
	if fresh && shaped {
		// Just made from PostgreSQL 15's template: its schema public already has that shape, and
		// checking costs a first connection into the new database (about a sixth of a create).
		return nil
	}
	return e.ownPublicSchema(ctx, dbName, role)
}

// ownPublicSchema gives the schema public of a new tenant database the shape PostgreSQL 15 gives
// it, whatever the server's version (Create skips it only for a database it has just made on
// PostgreSQL 15 or newer; one adopted after a crash, or made elsewhere, is always shaped): owned
// by pg_database_owner (the database's owner, so the
// quota holder while it is over its quota; the login role itself before PostgreSQL 14), and no
// CREATE for PUBLIC. PostgreSQL 14 and older let PUBLIC create there (the schema belonged to the
// bootstrap superuser), so a read-only credential could create tables in the owner's database.
// A database made from a template without the schema is left alone. Repeatable.
func (e *postgresEngine) ownPublicSchema(ctx context.Context, dbName, role string) error {
	t, err := e.tenant(ctx, dbName)
	if err != nil {
		return err
	}
	var hasSchema, hasDatabaseOwner bool
	if err := t.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = 'public'),
		EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'pg_database_owner')`).Scan(&hasSchema, &hasDatabaseOwner); err != nil {
		return fmt.Errorf("postgres: schema public of %s: %w", dbName, err)
	}
	if !hasSchema {
		return nil
	}
	owner := qi(role)
	if hasDatabaseOwner {
		owner = "pg_database_owner"
	}
	for _, s := range []string{"ALTER SCHEMA public OWNER TO " + owner, "REVOKE CREATE ON SCHEMA public FROM PUBLIC"} {
		if _, err := t.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("postgres: %s: %w", s, err)
		}
	}
	return nil
}

func (e *postgresEngine) terminate(ctx context.Context, where string, args ...any) error {
	_, err := e.pool.ExecContext(ctx,
		"SELECT pg_catalog.pg_terminate_backend(pid) FROM pg_catalog.pg_stat_activity WHERE "+where+" AND pid <> pg_catalog.pg_backend_pid()", args...)
	if err != nil {
		return fmt.Errorf("postgres: end sessions: %w", err)
	}
	return nil
}

// Drop removes dbName, its login role and its quota holder. The role's logins are refused and
// its sessions ended first. Another tenant may have granted the role something in its own
// database (every tenant can read pg_roles, so knows role names), and a role may own objects in
// another database (that database's owner may let it connect and create there): DROP
// ROLE refused those with 2BP01 and the role stayed, able to log in; dropRole clears them first.
// Every step is repeatable, so a retry after a crash ends with nothing left.
func (e *postgresEngine) Drop(ctx context.Context, dbName, role string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH NOLOGIN", qi(role))); err != nil && !db.IsCode(err, "42704") {
		return err
	}
	if err := e.terminate(ctx, "usename = $1", role); err != nil {
		return err
	}
	e.closeTenant(dbName)
	// The owner may have marked its database a template, which DROP DATABASE refuses.
	if err := e.exec(ctx, fmt.Sprintf("ALTER DATABASE %s IS_TEMPLATE false", qi(dbName))); err != nil && !db.IsCode(err, "3D000") {
		return err
	}
	if err := e.exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", qi(dbName))); err != nil {
		return err
	}
	if err := e.dropRole(ctx, role); err != nil {
		return err
	}
	holder := quotaHolder(dbName)
	ok, mark, err := e.roleMark(ctx, holder)
	if err != nil || !ok || mark != "provisioner:quota:"+dbName {
		return err
	}
	return e.dropRole(ctx, holder)
}

// dropRole drops role with what ties it to any database of the cluster. In every database
// where it owns objects or holds privileges (pg_shdepend), its objects are given to that
// database's owner (they lie in someone else's database and may hold their data, or have the
// owner's objects depending on them; dropping would take those with them) and then DROP OWNED
// BY revokes only its privileges and default privileges there, never anything of that
// database's owner. Privileges on shared objects (CONNECT on another tenant's database, granted
// by its owner) are revoked the same way from the admin's own database. A role owning a database
// is not dropped. Repeatable; a role gone already is not an error.
func (e *postgresEngine) dropRole(ctx context.Context, role string) error {
	for attempt := 0; ; attempt++ {
		rows, err := e.pool.QueryContext(ctx, `
			SELECT coalesce(d.datname, ''), s.dbid = 0 AND s.deptype = 'o'
			FROM pg_catalog.pg_shdepend s JOIN pg_catalog.pg_roles r ON r.oid = s.refobjid
			LEFT JOIN pg_catalog.pg_database d ON d.oid = s.dbid
			WHERE s.refclassid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND r.rolname = $1
			GROUP BY 1, 2`, role)
		if err != nil {
			return fmt.Errorf("postgres: dependencies of %s: %w", role, err)
		}
		var dbs []string
		shared, ownsDatabase := false, false
		for rows.Next() {
			var name string
			var owns bool
			if err := rows.Scan(&name, &owns); err != nil {
				rows.Close()
				return fmt.Errorf("postgres: dependencies of %s: %w", role, err)
			}
			switch {
			case owns:
				ownsDatabase = true
			case name == "":
				shared = true
			default:
				dbs = append(dbs, name)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("postgres: dependencies of %s: %w", role, err)
		}
		if ownsDatabase {
			return fmt.Errorf("postgres: role %s owns a database; it is not dropped", role)
		}
		for _, name := range dbs {
			if err := e.disown(ctx, name, role); err != nil {
				return err
			}
		}
		if shared && len(dbs) == 0 {
			// DROP OWNED in any database revokes privileges on shared objects; the role owns
			// nothing in the admin's database (it cannot connect there).
			if err := e.exec(ctx, fmt.Sprintf("DROP OWNED BY %s", qi(role))); err != nil && !db.IsCode(err, "42704") {
				return err
			}
		}
		err = e.exec(ctx, fmt.Sprintf("DROP ROLE IF EXISTS %s", qi(role)))
		if db.IsCode(err, "2BP01") && attempt < 2 { // granted something meanwhile
			continue
		}
		return err
	}
}

// disown gives what role owns in dbName to the database's owner and revokes the role's
// privileges there, in one transaction of an admin session pinned like every other.
func (e *postgresEngine) disown(ctx context.Context, dbName, role string) error {
	e.mu.Lock()
	t, kept := e.per[dbName]
	e.mu.Unlock()
	if !kept {
		p, err := e.openIn(ctx, dbName)
		if err != nil {
			return err
		}
		defer p.Close()
		t = p
	}
	tx, err := t.BeginTx(ctx, nil)
	if err != nil {
		if db.IsCode(err, "3D000") { // dropped meanwhile
			return nil
		}
		return fmt.Errorf("postgres: begin in %s: %w", dbName, err)
	}
	defer tx.Rollback() //nolint:errcheck
	var owner string
	if err := tx.QueryRowContext(ctx, `SELECT r.rolname FROM pg_catalog.pg_database d JOIN pg_catalog.pg_roles r ON r.oid = d.datdba
		WHERE d.datname = pg_catalog.current_database()`).Scan(&owner); err != nil {
		return fmt.Errorf("postgres: owner of %s: %w", dbName, err)
	}
	if owner == role {
		return fmt.Errorf("postgres: role %s owns database %s; it is not dropped", role, dbName)
	}
	for _, st := range []string{
		fmt.Sprintf("REASSIGN OWNED BY %s TO %s", qi(role), qi(owner)),
		fmt.Sprintf("DROP OWNED BY %s", qi(role)),
	} {
		if _, err := tx.ExecContext(ctx, st); err != nil {
			if db.IsCode(err, "42704") { // the role was dropped meanwhile
				return nil
			}
			return fmt.Errorf("postgres: %s in %s: %w", st, dbName, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres: commit in %s: %w", dbName, err)
	}
	return nil
}

// SetLogin allows or refuses the logins of the database's login role. Refusing (pause) also
// closes the database to every other role (closeToOthers: the owner may have granted CONNECT to
// PUBLIC or to another tenant's role, which still connected to a paused database; the
// credentials of the database lose it too: the provisioner has refused their logins first) and
// ends every session of the role. Allowing grants CONNECT to the login role again (SetUserLogin
// to each Active credential); what the owner had granted to PUBLIC or to other roles is not
// given back.
func (e *postgresEngine) SetLogin(ctx context.Context, dbName, role string, enabled bool) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if enabled {
		if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH LOGIN%s", qi(role), e.limit)); err != nil {
			return err
		}
		return e.grantConnect(ctx, dbName, role)
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH NOLOGIN", qi(role))); err != nil {
		return err
	}
	if err := e.closeToOthers(ctx, dbName, []string{role}); err != nil {
		return err
	}
	return e.terminate(ctx, "usename = $1", role)
}

// RevokeForeignAccess implements foreignAccessRevoker: it closes the database to every role but
// its login role and keep (closeToOthers), as a pause does, leaving the logins as they are. Keep's
// names only reach the server as parameters.
func (e *postgresEngine) RevokeForeignAccess(ctx context.Context, dbName, role string, keep []string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	return e.closeToOthers(ctx, dbName, append([]string{role}, keep...))
}

// closeToOthers closes dbName to every role but keep: it revokes CONNECT on the database from
// PUBLIC and from every other role (the database's owner and superusers keep theirs; CASCADE
// takes what a grantee granted on), then ends every session on the database of a role not in
// keep, the service's own aside. What those roles were granted inside the database stays, out of
// their reach without CONNECT.
func (e *postgresEngine) closeToOthers(ctx context.Context, dbName string, keep []string) error {
	if err := e.revokeConnect(ctx, dbName, keep); err != nil {
		return err
	}
	return e.terminate(ctx, "datname = $1 AND usename <> current_user AND usename <> ALL($2::text[])", dbName, "{"+strings.Join(keep, ",")+"}")
}

// grantConnect grants CONNECT on dbName to role (a database that is gone needs nothing).
func (e *postgresEngine) grantConnect(ctx context.Context, dbName, role string) error {
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	err = e.exec(ctx, fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", qi(dbName), qi(role)))
	if db.IsCode(err, "3D000") {
		return nil
	}
	return err
}

// revokeConnect revokes CONNECT on dbName from PUBLIC and from every role but keep, the
// database's owner and superusers.
func (e *postgresEngine) revokeConnect(ctx context.Context, dbName string, keep []string) error {
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	rows, err := e.pool.QueryContext(ctx, `SELECT DISTINCT pg_catalog.quote_ident(r.rolname) FROM pg_catalog.pg_database d
		CROSS JOIN LATERAL pg_catalog.aclexplode(d.datacl) a JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
		WHERE d.datname = $1 AND a.privilege_type = 'CONNECT' AND NOT r.rolsuper AND r.oid <> d.datdba AND r.rolname <> ALL($2::text[])`, dbName, "{"+strings.Join(keep, ",")+"}")
	if err != nil {
		return fmt.Errorf("postgres: list CONNECT of %s: %w", dbName, err)
	}
	who := []string{"PUBLIC"}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: list CONNECT of %s: %w", dbName, err)
		}
		who = append(who, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: list CONNECT of %s: %w", dbName, err)
	}
	err = e.exec(ctx, fmt.Sprintf("REVOKE CONNECT ON DATABASE %s FROM %s CASCADE", qi(dbName), strings.Join(who, ", ")))
	if db.IsCode(err, "3D000") {
		return nil
	}
	return err
}

// SetOwnerPassword implements Engine. ALTER ROLE … PASSWORD leaves LOGIN or NOLOGIN as it is;
// the connection limit is set again as everywhere else a tenant role is changed.
func (e *postgresEngine) SetOwnerPassword(ctx context.Context, dbName, role, password string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH PASSWORD %s%s", qi(role), ql(password), e.limit)); err != nil {
		if db.IsCode(err, "42704") { // no such role: nothing to change
			return nil
		}
		return err
	}
	return e.terminate(ctx, "usename = $1", role)
}

// quotaHolder is the role that owns a PostgreSQL tenant database's objects while it is over its
// quota; it cannot log in.
func quotaHolder(dbName string) string { return dbName + "_quota" }

// SetReadOnly switches dbName to read-only or back, with privileges the tenant cannot undo.
// default_transaction_read_only alone is advisory (a session may SET it off), and an owner can
// always grant itself anything on what it owns, so over the quota the ownership of the database,
// its schemas, tables, sequences, materialized views and large objects moves from every role
// that is not a superuser (the login role, its full-access credentials, and any other tenant's
// role the owner let create there) to a NOLOGIN role of the service's. Ownership alone is not
// enough: what the owner granted before (to PUBLIC, to its credentials, to other tenants' roles)
// stays with the objects, so every privilege that writes or creates is then revoked from every
// role but the holder, PUBLIC included: on tables everything but SELECT, on sequences USAGE and
// UPDATE, CREATE on every schema, UPDATE on large objects, CREATE and TEMPORARY on the database
// (CONNECT and reads stay). The holder then grants the login role SELECT, DELETE and TRUNCATE
// (freeing space), nothing else. Those revoked grants are not given back when the database is
// writable again: the owner grants them again if it wants them. Default privileges (ALTER DEFAULT
// PRIVILEGES) are left as they are: they apply only to objects created later, and while read-only
// no tenant role may create any. Functions stay with their owner: without write privileges a
// SECURITY DEFINER function of the tenant's writes nothing. Creating large objects is refused to
// PUBLIC and to the login role in that database (and granted back to the login role alone).
// Switching back gives everything the holder owns to the login role and drops the holder. Both
// directions run in one transaction and are repeatable.
//
// The database's sessions (the service's own aside) are ended before the transaction, since one
// holding a lock on a table (LOCK TABLE in an open transaction) would keep ALTER … OWNER waiting,
// and after it, so every session starts with the new setting. The transaction waits at most
// switchLockWait for any lock; a tenant that takes one again meanwhile makes it fail (55P03), and
// it is tried again once, then left to the next usage refresh: one tenant's lock never holds up
// the switch of any other database.
func (e *postgresEngine) SetReadOnly(ctx context.Context, dbName, role string, readOnly bool) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	t, err := e.tenant(ctx, dbName)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		if err := e.terminate(ctx, "datname = $1 AND usename <> current_user", dbName); err != nil {
			return err
		}
		err = e.switchOwners(ctx, t, dbName, role, readOnly)
		if err == nil || !db.IsCode(err, "55P03") || attempt == switchAttempts {
			break
		}
	}
	if err != nil {
		return err
	}
	// The setting is kept for the clear error it gives ("cannot execute INSERT in a read-only
	// transaction"); the privileges above are what holds.
	v := "off"
	if readOnly {
		v = "on"
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER DATABASE %s SET default_transaction_read_only = %s", qi(dbName), v)); err != nil {
		return err
	}
	// Sessions pick the setting up when they connect: end the open ones.
	// The service's own sessions there (grants for credentials) stay.
	return e.terminate(ctx, "datname = $1 AND usename <> current_user", dbName)
}

// switchLockWait bounds how long the read-only switch waits for one lock; switchAttempts is how
// many times SetReadOnly tries when a lock is not granted in time.
const (
	switchLockWait = "2s"
	switchAttempts = 2
)

// switchOwners is SetReadOnly's transaction in dbName (t: the admin pool there).
func (e *postgresEngine) switchOwners(ctx context.Context, t *sql.DB, dbName, role string, readOnly bool) error {
	holder := quotaHolder(dbName)
	tx, err := t.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck
	run := func(stmts ...string) error {
		for _, st := range stmts {
			if _, err := tx.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("postgres: %s: %w", st, err)
			}
		}
		return nil
	}
	list := func(what, q string, args ...any) ([]string, error) {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("postgres: list %s: %w", what, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return nil, fmt.Errorf("postgres: list %s: %w", what, err)
			}
			out = append(out, s)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("postgres: list %s: %w", what, err)
		}
		return out, nil
	}
	if err := run("SET LOCAL lock_timeout = '" + switchLockWait + "'"); err != nil {
		return err
	}
	var exists bool
	var mark string
	err = tx.QueryRowContext(ctx, "SELECT true, coalesce(pg_catalog.shobj_description(oid, 'pg_authid'), '') FROM pg_catalog.pg_roles WHERE rolname = $1", holder).Scan(&exists, &mark)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("postgres: %w", err)
	}
	holderMark := "provisioner:quota:" + dbName
	if exists && mark != holderMark {
		return fmt.Errorf("postgres: role %s exists and is not the quota holder of %s", holder, dbName)
	}
	var from, to string
	if readOnly {
		if !exists {
			if err := run(fmt.Sprintf("CREATE ROLE %s NOLOGIN NOINHERIT", qi(holder)),
				fmt.Sprintf("COMMENT ON ROLE %s IS %s", qi(holder), ql(holderMark))); err != nil {
				return err
			}
		}
		from, to = role, holder
	} else if exists {
		from, to = holder, role
	}
	if from != "" {
		// Everything the writers own. Over the quota: every role but superusers, the holder and
		// the predefined ones (pg_database_owner owns schema public: it is the holder then). Back:
		// the holder's.
		stmts, err := list("owned objects", `
			WITH w AS (SELECT oid FROM pg_catalog.pg_roles
			           WHERE CASE WHEN $2 THEN NOT rolsuper AND rolname <> $3 AND rolname NOT LIKE 'pg\_%' ELSE rolname = $1 END)
			SELECT pg_catalog.format('ALTER SCHEMA %I OWNER TO %I', n.nspname, $3::text) FROM pg_catalog.pg_namespace n WHERE n.nspowner IN (SELECT oid FROM w)
			UNION ALL
			SELECT pg_catalog.format('ALTER %s %I.%I OWNER TO %I',
			              CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
			              n.nspname, c.relname, $3::text)
			FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relowner IN (SELECT oid FROM w) AND c.relkind IN ('r', 'p', 'm', 'f', 'S')
			  AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
			           AND d.objid = c.oid AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype IN ('a', 'i')))
			UNION ALL
			SELECT pg_catalog.format('ALTER LARGE OBJECT %s OWNER TO %I', m.oid, $3::text) FROM pg_catalog.pg_largeobject_metadata m WHERE m.lomowner IN (SELECT oid FROM w)`,
			from, readOnly, to)
		if err != nil {
			return err
		}
		stmts = append(stmts, fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", qi(dbName), qi(to)))
		if err := run(stmts...); err != nil {
			return err
		}
	}
	if readOnly {
		schemas, err := list("schemas", `SELECT nspname FROM pg_catalog.pg_namespace
			WHERE nspname <> 'information_schema' AND nspname NOT LIKE 'pg\_%'`)
		if err != nil {
			return err
		}
		// Every role holding a privilege in the database, but the holder, superusers and
		// pg_database_owner (the holder now; revoking from it would take CREATE on schema public
		// from the login role once it owns the database again). PUBLIC is always named.
		grantees, err := list("grantees", `
			WITH acl AS (
			  SELECT c.relacl AS a FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			    WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
			  UNION ALL SELECT n.nspacl FROM pg_catalog.pg_namespace n WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
			  UNION ALL SELECT m.lomacl FROM pg_catalog.pg_largeobject_metadata m
			  UNION ALL SELECT d.datacl FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
			SELECT DISTINCT pg_catalog.quote_ident(r.rolname) FROM acl CROSS JOIN LATERAL pg_catalog.aclexplode(acl.a) x
			  JOIN pg_catalog.pg_roles r ON r.oid = x.grantee
			WHERE acl.a IS NOT NULL AND NOT r.rolsuper AND r.rolname <> $1 AND r.rolname <> 'pg_database_owner'`, holder)
		if err != nil {
			return err
		}
		who := strings.Join(append([]string{"PUBLIC"}, grantees...), ", ")
		los, err := list("large objects", `SELECT m.oid::text FROM pg_catalog.pg_largeobject_metadata m
			WHERE EXISTS (SELECT 1 FROM pg_catalog.aclexplode(m.lomacl) x WHERE x.grantee <> m.lomowner AND x.privilege_type = 'UPDATE')`)
		if err != nil {
			return err
		}
		var stmts []string
		for _, n := range schemas {
			stmts = append(stmts, fmt.Sprintf("REVOKE CREATE ON SCHEMA %s FROM %s CASCADE", qi(n), who),
				fmt.Sprintf("REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA %s FROM %s CASCADE", qi(n), who),
				fmt.Sprintf("REVOKE USAGE, UPDATE ON ALL SEQUENCES IN SCHEMA %s FROM %s CASCADE", qi(n), who))
		}
		for _, lo := range los {
			stmts = append(stmts, fmt.Sprintf("REVOKE UPDATE ON LARGE OBJECT %s FROM %s CASCADE", lo, who))
		}
		stmts = append(stmts, fmt.Sprintf("REVOKE CREATE, TEMPORARY ON DATABASE %s FROM %s CASCADE", qi(dbName), who))
		// What the login role (and through it the full-access credentials) may still do.
		for _, n := range schemas {
			stmts = append(stmts, fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", qi(n), qi(role)),
				fmt.Sprintf("GRANT SELECT, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA %s TO %s", qi(n), qi(role)),
				fmt.Sprintf("GRANT SELECT ON ALL SEQUENCES IN SCHEMA %s TO %s", qi(n), qi(role)))
		}
		// The login role's CONNECT was the owner's and went with the ownership: CONNECT only.
		stmts = append(stmts, "REVOKE EXECUTE ON "+loCreators+" FROM PUBLIC", fmt.Sprintf("REVOKE EXECUTE ON %s FROM %s", loCreators, qi(role)),
			fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", qi(dbName), qi(role)))
		if err := run(stmts...); err != nil {
			return err
		}
	} else {
		// To the login role (and through it its full-access credentials), not back to PUBLIC:
		// a read-only credential creates no large object.
		if err := run("REVOKE EXECUTE ON "+loCreators+" FROM PUBLIC", fmt.Sprintf("GRANT EXECUTE ON %s TO %s", loCreators, qi(role)),
			fmt.Sprintf("GRANT TEMPORARY ON DATABASE %s TO %s", qi(dbName), qi(role))); err != nil {
			return err
		}
		if exists {
			if err := run(fmt.Sprintf("DROP OWNED BY %s", qi(holder)), fmt.Sprintf("DROP ROLE %s", qi(holder))); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return nil
}

// Usage implements Engine. A database is active while a tenant's session is connected to it: a
// client backend of a role other than the service's own (its admin sessions there, kept for a
// while after granting a read-only credential or switching the database read-only, and
// autovacuum's workers made every refresh set lastActivity of a database nobody used).
func (e *postgresEngine) Usage(ctx context.Context, dbs []string) (map[string]Usage, error) {
	out := map[string]Usage{}
	if err := e.lockDown(ctx); err != nil { // the refresher's first run locks an existing cluster down
		return nil, err
	}
	if len(dbs) == 0 {
		return out, nil
	}
	e.mu.Lock()
	limited := e.limitsSet
	e.mu.Unlock()
	if !limited { // and gives the roles made before the limit existed theirs
		if err := e.limitRoles(ctx, dbs); err != nil {
			return nil, err
		}
		e.mu.Lock()
		e.limitsSet = true
		e.mu.Unlock()
	}
	rows, err := e.pool.QueryContext(ctx, `
		SELECT d.datname, pg_catalog.pg_database_size(d.datname) + `+pgSharedBytes+`,
		       EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.datname = d.datname AND a.pid <> pg_catalog.pg_backend_pid()
		               AND a.backend_type = 'client backend' AND a.usename <> current_user)
		FROM pg_catalog.pg_database d WHERE d.datname = ANY($1::text[])`, "{"+strings.Join(dbs, ",")+"}")
	if err != nil {
		return nil, fmt.Errorf("postgres usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var u Usage
		if err := rows.Scan(&name, &u.Bytes, &u.Active); err != nil {
			return nil, fmt.Errorf("postgres usage: %w", err)
		}
		out[name] = u
	}
	return out, rows.Err()
}

// pgSharedBytes is what a tenant database d writes into the cluster's shared catalogs, which
// pg_database_size does not count: its owner's COMMENT ON DATABASE (pg_shdescription) and the
// settings of ALTER DATABASE … SET (pg_db_role_setting), which take any text of a string setting
// such as search_path, and the settings its roles give themselves (ALTER ROLE <self> [IN DATABASE
// …] SET, which every role may do, read-only or not) and the comments on them. Before, a tenant
// stored gigabytes there over its quota. Its roles are the database's owner and the roles granted
// CONNECT on it (the login role, its credentials), superusers aside. Text is counted as stored
// uncompressed (octet_length): every session loads the settings it applies whole.
const pgSharedBytes = `COALESCE((SELECT SUM(pg_catalog.octet_length(s.setconfig::text)) FROM pg_catalog.pg_db_role_setting s
		         WHERE s.setdatabase = d.oid OR s.setrole IN (` + pgTenantRoles + `)), 0)
		     + COALESCE((SELECT SUM(pg_catalog.octet_length(c.description)) FROM pg_catalog.pg_shdescription c
		         WHERE (c.classoid = 'pg_catalog.pg_database'::pg_catalog.regclass AND c.objoid = d.oid)
		            OR (c.classoid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND c.objoid IN (` + pgTenantRoles + `))), 0)`

// pgTenantRoles are the roles of database d: its owner and the roles granted CONNECT on it, but
// no superuser (the service's own).
const pgTenantRoles = `SELECT r.oid FROM pg_catalog.pg_roles r WHERE NOT r.rolsuper AND (r.oid = d.datdba
		            OR r.oid IN (SELECT a.grantee FROM pg_catalog.aclexplode(d.datacl) a WHERE a.privilege_type = 'CONNECT'))`

// maxRoleSettingBytes bounds the text of the settings one role of a read-only (or over-quota)
// database gives itself (ALTER ROLE <itself> [IN DATABASE …] SET): far more than any search_path.
const maxRoleSettingBytes = 64 << 10

// GuardOverQuota resets every setting a role of one of dbs has on itself (ALTER ROLE … RESET,
// role-wide and in each database) when their text is over maxRoleSettingBytes, but the
// service's own default_transaction_read_only (read-only credentials). Read-only takes
// the database's ownership away, so its comment and settings cannot grow, but a role may always
// set its own defaults: without this a read-only tenant went on filling the shared catalogue
// pg_db_role_setting. Settings of the database itself are left alone (counted, see pgSharedBytes).
func (e *postgresEngine) GuardOverQuota(ctx context.Context, dbs []string) error {
	rows, err := e.pool.QueryContext(ctx, `
		WITH roles AS (SELECT DISTINCT r.oid, r.rolname FROM pg_catalog.pg_database d
		                 JOIN pg_catalog.pg_roles r ON NOT r.rolsuper AND (r.oid = d.datdba
		                   OR r.oid IN (SELECT a.grantee FROM pg_catalog.aclexplode(d.datacl) a WHERE a.privilege_type = 'CONNECT'))
		               WHERE d.datname = ANY($1::text[])),
		     big AS (SELECT s.setrole FROM pg_catalog.pg_db_role_setting s WHERE s.setrole IN (SELECT oid FROM roles)
		             GROUP BY s.setrole HAVING SUM(pg_catalog.octet_length(s.setconfig::text)) > $2)
		SELECT DISTINCT r.rolname, COALESCE(o.datname, ''), pg_catalog.split_part(c.setting, '=', 1)
		FROM pg_catalog.pg_db_role_setting s CROSS JOIN LATERAL pg_catalog.unnest(s.setconfig) c(setting)
		  JOIN roles r ON r.oid = s.setrole LEFT JOIN pg_catalog.pg_database o ON o.oid = s.setdatabase
		WHERE s.setrole IN (SELECT setrole FROM big) AND (s.setdatabase = 0 OR o.oid IS NOT NULL)
		  AND pg_catalog.split_part(c.setting, '=', 1) <> 'default_transaction_read_only'`,
		"{"+strings.Join(dbs, ",")+"}", maxRoleSettingBytes)
	if err != nil {
		return fmt.Errorf("postgres: list role settings: %w", err)
	}
	var stmts []string
	for rows.Next() {
		var role, in, name string
		if err := rows.Scan(&role, &in, &name); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: list role settings: %w", err)
		}
		st := fmt.Sprintf("ALTER ROLE %s", qi(role))
		if in != "" {
			st += " IN DATABASE " + qi(in)
		}
		stmts = append(stmts, st+" RESET "+qi(name))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: list role settings: %w", err)
	}
	return e.exec(ctx, stmts...)
}

// limitRoles gives CONNECTION LIMIT connLimit to every role that is not a superuser and may
// connect to one of dbs (their login roles and access credentials) but has another limit, such as
// roles made before there was one.
func (e *postgresEngine) limitRoles(ctx context.Context, dbs []string) error {
	rows, err := e.pool.QueryContext(ctx, `
		SELECT DISTINCT r.rolname FROM pg_catalog.pg_database d
		  CROSS JOIN LATERAL pg_catalog.aclexplode(d.datacl) a
		  JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
		WHERE d.datname = ANY($1::text[]) AND a.privilege_type = 'CONNECT' AND NOT r.rolsuper AND r.rolconnlimit <> $2`,
		"{"+strings.Join(dbs, ",")+"}", e.connLimit)
	if err != nil {
		return fmt.Errorf("postgres: list roles: %w", err)
	}
	var roles []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: list roles: %w", err)
		}
		if SafeName.MatchString(r) {
			roles = append(roles, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: list roles: %w", err)
	}
	for _, r := range roles {
		if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH%s", qi(r), e.limit)); err != nil && !db.IsCode(err, "42704") {
			return err
		}
	}
	return nil
}

// serverVersion is the server's server_version_num, read once.
func (e *postgresEngine) serverVersion(ctx context.Context) (int, error) {
	e.mu.Lock()
	v := e.version
	e.mu.Unlock()
	if v != 0 {
		return v, nil
	}
	if err := e.pool.QueryRowContext(ctx, "SELECT pg_catalog.current_setting('server_version_num')::int").Scan(&v); err != nil {
		return 0, fmt.Errorf("postgres version: %w", err)
	}
	e.mu.Lock()
	e.version = v
	e.mu.Unlock()
	return v, nil
}

// openIn opens an admin pool into dbName, with the pinned settings (see pinnedSettings: the
// tenant's database defaults do not apply to it; default_transaction_read_only off is why the
// service's own sessions write grants while the database is read-only).
func (e *postgresEngine) openIn(ctx context.Context, dbName string) (*sql.DB, error) {
	version, err := e.serverVersion(ctx)
	if err != nil {
		return nil, err
	}
	u := pinned(*e.admin, version)
	u.Path = "/" + dbName
	conn, err := db.Connector(u.String())
	if err != nil {
		return nil, err
	}
	p := sql.OpenDB(conn)
	p.SetMaxOpenConns(2)
	// Kept for later calls, but not for ever: an idle session per tenant database that was ever
	// given a read-only credential or switched read-only took a connection slot of the server
	// for good (a superuser's: with enough databases, the tenants were refused).
	p.SetConnMaxIdleTime(tenantIdleTime)
	return p, nil
}

// tenantIdleTime is how long an admin session into a tenant database stays open unused.
var tenantIdleTime = time.Minute

// tenant returns an admin connection into dbName (for grants inside it), kept for later calls.
func (e *postgresEngine) tenant(ctx context.Context, dbName string) (*sql.DB, error) {
	e.mu.Lock()
	p, ok := e.per[dbName]
	e.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := e.openIn(ctx, dbName)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if q, ok := e.per[dbName]; ok { // opened concurrently
		_ = p.Close()
		return q, nil
	}
	e.per[dbName] = p
	return p, nil
}

func (e *postgresEngine) closeTenant(dbName string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.per[dbName]; ok {
		_ = p.Close()
		delete(e.per, dbName)
	}
}

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

// credentialRole tells whether the role user exists; it is ErrRoleTaken when it does but was not
// made for the credential of marker. A role without any mark, made before roles were marked, is
// that credential's (and is marked now) only when it has exactly the footprint the service gave
// the credential roles it made then: a login role with no attribute beyond LOGIN, privileges
// (CONNECT) on database dbName and nothing in any other database, owning no database, a member of
// nothing but dbName's login role (named after the database; full access) and with no member. A
// tenant's owner, a superuser, another tenant's or a hand-made role that has anything elsewhere is
// never taken for one.
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

// DropUser removes a credential's role. What the role owns in the tenant database (tables a
// full-access credential created) is the tenant's data: it is first given to the role that owns
// the database now (the login role, or the quota holder while the database is over its quota,
// which gives it back when the database is writable again), then DROP OWNED BY only revokes the
// role's privileges and default privileges (dropRole: the same in any other database where the
// role owns or was granted something, since another tenant may grant to it), and the role is
// dropped. The role's logins are refused and its sessions ended first, so none creates an object
// meanwhile. The old code ran DROP OWNED BY alone, which dropped the credential's tables with
// their rows.
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

func (e *postgresEngine) ConnectionString(dbName, user, password string) string {
	u := url.URL{Scheme: "postgresql", User: url.UserPassword(user, password),
		Host: net.JoinHostPort(e.host, strconv.Itoa(e.port)), Path: "/" + dbName}
	return u.String()
}
