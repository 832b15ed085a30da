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
	// limitsSet: the roles of the live databases have connLimit (set when a usage refresh has
	// named them all, see usagePass).
	limitsSet bool
	// locks serialise catalogue changes per tenant database (see dbLocks).
	locks *dbLocks
}

// pinnedSettings are sent in the startup packet of every admin session, where they outrank a
// tenant's ALTER DATABASE … SET defaults: search_path (pg_temp last; no tenant view or function
// shadows the catalogue), role, read-only and isolation defaults, exit_on_error,
// standard_conforming_strings and local_preload_libraries. The engine's SQL also names every
// catalogue object with its schema.
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
	sizeEnginePool(pool)
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

func (e *postgresEngine) ID() string { return "postgres" }

func (e *postgresEngine) Name() string { return "PostgreSQL" }

func (e *postgresEngine) Host() string { return e.host }

func (e *postgresEngine) Port() int { return e.port }

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

// ensureRole creates role as a login role with password and the connection limit, or, when it
// exists (a crash interrupted an earlier attempt, or it was made concurrently), sets them on it.
// The CREATE carries no password: the server logs a refused statement's text (duplicate_object),
// never the password with it. The role cannot log in until the ALTER that follows sets one.
func (e *postgresEngine) ensureRole(ctx context.Context, role, password string) error {
	err := e.exec(ctx, fmt.Sprintf("CREATE ROLE %s WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE", qi(role)))
	if err != nil && !db.IsCode(err, "42710") { // duplicate_object: adopted
		return err
	}
	return e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH LOGIN PASSWORD %s%s", qi(role), ql(password), e.limit))
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
	// The CREATE goes first; an existing database (duplicate_database) is adopted.
	err := e.exec(ctx, fmt.Sprintf("CREATE DATABASE %s OWNER %s", qi(dbName), qi(role)))
	if err != nil && !db.IsCode(err, "42P04") {
		return err
	}
	fresh := err == nil
	// One round trip, one implicit transaction (a statement without arguments goes by the simple
	// protocol, which takes several).
	if err := e.exec(ctx, fmt.Sprintf("REVOKE ALL ON DATABASE %s FROM PUBLIC; GRANT CONNECT, TEMPORARY ON DATABASE %s TO %s",
		qi(dbName), qi(dbName), qi(role))); err != nil {
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

// ownPublicSchema gives a tenant database's schema public PostgreSQL 15's shape on any version:
// owned by pg_database_owner (the login role before PostgreSQL 14) and no CREATE for PUBLIC, so a
// read-only credential cannot create tables there. A database without the schema is left alone.
// Repeatable.
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

// dropRole drops role and what ties it to any database of the cluster: where it owns objects
// they go to that database's owner, then DROP OWNED BY revokes only its privileges; privileges on
// shared objects are revoked from the admin's database. A role owning a database is not dropped.
// Repeatable; a role gone already is not an error.
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

func (e *postgresEngine) ConnectionString(dbName, user, password string) string {
	u := url.URL{Scheme: "postgresql", User: url.UserPassword(user, password),
		Host: net.JoinHostPort(e.host, strconv.Itoa(e.port)), Path: "/" + dbName}
	return u.String()
}
