package databases

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// mysqlEngine hosts tenant databases on a MySQL or MariaDB server through an admin connection.
type mysqlEngine struct {
	pool *sql.DB
	host string
	port int
	// maxConns is every tenant user's MAX_USER_CONNECTIONS (0: the server's max_user_connections,
	// by default no limit); limit is the clause that sets it.
	maxConns int
	limit    string

	mu         sync.Mutex
	marksReady bool // the table of credential users' marks exists
	// grantsEscaped: the grants on every live tenant schema name its schema alone (see
	// escapeGrants); checked once per process, at the first usage refresh.
	grantsEscaped bool
	// flavor: "mariadb" or "mysql" ("" until read).
	flavor string
	// eventsRevoked: no tenant user of the databases the first usage refresh named has EVENT.
	eventsRevoked bool
	// limitsSet: every tenant user of the databases the first usage refresh named has maxConns.
	limitsSet bool
	// tablespaces is the information_schema table listing InnoDB's tablespace files with their
	// sizes (see mysqlTablespaces; "" until looked up, "-" when the server has none).
	tablespaces string
}

func newMySQL(dsn string, pub EnginePublic, maxConns int) (*mysqlEngine, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("not a MySQL DSN like root@tcp(127.0.0.1:3306)/")
	}
	cfg.Timeout = 5 * time.Second
	cfg.ReadTimeout = 30 * time.Second
	cfg.WriteTimeout = 30 * time.Second
	cfg.MultiStatements = false
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	pool := sql.OpenDB(conn)
	pool.SetMaxOpenConns(8)
	pool.SetConnMaxLifetime(5 * time.Minute)
	e := &mysqlEngine{pool: pool, host: "127.0.0.1", port: 3306, limit: fmt.Sprintf(" WITH MAX_USER_CONNECTIONS %d", max(maxConns, 0)),
		maxConns: max(maxConns, 0)}
	if h, p, err := net.SplitHostPort(cfg.Addr); err == nil {
		e.host = h
		if n, err := strconv.Atoi(p); err == nil {
			e.port = n
		}
	}
	if pub.PublicHost != "" {
		e.host = pub.PublicHost
	}
	if pub.PublicPort != 0 {
		e.port = pub.PublicPort
	}
	return e, nil
}

var _ Engine = (*mysqlEngine)(nil)

func (e *mysqlEngine) ID() string   { return "mysql" }
func (e *mysqlEngine) Name() string { return "MySQL / MariaDB" }
func (e *mysqlEngine) Host() string { return e.host }
func (e *mysqlEngine) Port() int    { return e.port }
func (e *mysqlEngine) Close() error { return e.pool.Close() }

func (e *mysqlEngine) Version(ctx context.Context) (string, error) {
	var v string
	if err := e.pool.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "", fmt.Errorf("mysql version: %w", err)
	}
	return v, nil
}

// mqi quotes a MySQL identifier; mqa a 'user'@'%' account.
func mqi(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
func mqa(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'@'%'" }

// grantDB is a schema name as a GRANT or REVOKE names it (and mysql.db stores it): there `_`
// and `%` are wildcards, so u1_x would also cover u1ax and u1bx; escaped, the privilege covers
// this schema alone. Names are SafeName (no backslash).
func grantDB(s string) string {
	return strings.NewReplacer("_", `\_`, "%", `\%`).Replace(s)
}

// onSchema is the ON part of a GRANT or REVOKE on every table of schema s.
func onSchema(s string) string { return mqi(grantDB(s)) + ".*" }

func (e *mysqlEngine) exec(ctx context.Context, stmts ...string) error {
	for _, s := range stmts {
		if _, err := e.pool.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("mysql: %s: %w", redactStmt(strings.Replace(s, "IDENTIFIED BY", "PASSWORD", 1)), err)
		}
	}
	return nil
}

// ensureUser creates or adopts user with password and the per-user session limit (one tenant
// could otherwise take every connection of the server, the service's own included).
func (e *mysqlEngine) ensureUser(ctx context.Context, user, password string) error {
	return e.exec(ctx,
		fmt.Sprintf("CREATE USER IF NOT EXISTS %s IDENTIFIED BY %s%s", mqa(user), ql(password), e.limit),
		fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s%s", mqa(user), ql(password), e.limit))
}

func (e *mysqlEngine) Create(ctx context.Context, dbName, role, password string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if err := e.ensureUser(ctx, role, password); err != nil {
		return err
	}
	privs, err := e.writerPrivs(ctx)
	if err != nil {
		return err
	}
	return e.exec(ctx,
		fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s CHARACTER SET utf8mb4", mqi(dbName)),
		fmt.Sprintf("GRANT %s ON %s TO %s", privs, onSchema(dbName), mqa(role)))
}

// kill ends the sessions of user.
func (e *mysqlEngine) kill(ctx context.Context, user string) error {
	rows, err := e.pool.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE user = ?", user)
	if err != nil {
		return fmt.Errorf("mysql: list sessions: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err == nil {
			ids = append(ids, id)
		}
	}
	rows.Close()
	for _, id := range ids {
		if _, err := e.pool.ExecContext(ctx, fmt.Sprintf("KILL %d", id)); err != nil && !isMySQLCode(err, 1094) {
			return fmt.Errorf("mysql: kill %d: %w", id, err)
		}
	}
	return nil
}

// mysqlDropLockWait bounds, in seconds, how long DROP DATABASE waits for a metadata lock.
const mysqlDropLockWait = 5

// Drop removes dbName and its user. The user's account is locked before its sessions are ended,
// so the tenant cannot reconnect in between and take a metadata lock (an open transaction that
// read a table) that DROP DATABASE would wait for; and the drop waits at most mysqlDropLockWait
// seconds for any lock (lock_wait_timeout is a day by default on MariaDB, a year on MySQL), then
// fails (ER_LOCK_WAIT_TIMEOUT) and is retried by the finisher or the next DELETE, rather than
// leaving the server waiting after the request gave up. Repeatable.
func (e *mysqlEngine) Drop(ctx context.Context, dbName, role string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER USER IF EXISTS %s ACCOUNT LOCK", mqa(role))); err != nil {
		return err
	}
	if err := e.kill(ctx, role); err != nil {
		return err
	}
	conn, err := e.pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	defer conn.Close()
	// The connection goes back to the pool without the bound: it is discarded.
	defer conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck
	for _, s := range []string{fmt.Sprintf("SET SESSION lock_wait_timeout = %d", mysqlDropLockWait),
		fmt.Sprintf("DROP DATABASE IF EXISTS %s", mqi(dbName)),
		fmt.Sprintf("DROP USER IF EXISTS %s", mqa(role))} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("mysql: %s: %w", s, err)
		}
	}
	return nil
}

func (e *mysqlEngine) SetLogin(ctx context.Context, dbName, role string, enabled bool) error {
	if err := checkNames(role); err != nil {
		return err
	}
	if enabled {
		return e.exec(ctx, fmt.Sprintf("ALTER USER %s%s ACCOUNT UNLOCK", mqa(role), e.limit))
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER USER %s ACCOUNT LOCK", mqa(role))); err != nil {
		return err
	}
	return e.kill(ctx, role)
}

// SetOwnerPassword implements Engine. ALTER USER … IDENTIFIED BY leaves ACCOUNT LOCK or UNLOCK
// as it is; MAX_USER_CONNECTIONS is set again as everywhere else a tenant user is changed.
func (e *mysqlEngine) SetOwnerPassword(ctx context.Context, dbName, role, password string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s%s", mqa(role), ql(password), e.limit)); err != nil {
		if isMySQLCode(err, 1396) { // no such user: nothing to change
			return nil
		}
		return err
	}
	return e.kill(ctx, role)
}

// writerPrivs is what a database's owner and its full-access credentials are granted on its
// schema: everything on the schema but EVENT (and GRANT OPTION). An event runs by itself as its
// definer, even while the definer's account is locked, so a paused tenant's events went on
// running (and ALTER EVENT by the admin would make the admin their definer); tenants are not
// promised events. MariaDB adds DELETE HISTORY (system-versioned tables), which MySQL lacks.
func (e *mysqlEngine) writerPrivs(ctx context.Context) (string, error) {
	const privs = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, REFERENCES, INDEX, ALTER, CREATE TEMPORARY TABLES, " +
		"LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE, TRIGGER"
	e.mu.Lock()
	flavor := e.flavor
	e.mu.Unlock()
	if flavor == "" {
		v, err := e.Version(ctx)
		if err != nil {
			return "", err
		}
		flavor = "mysql"
		if strings.Contains(strings.ToLower(v), "mariadb") {
			flavor = "mariadb"
		}
		e.mu.Lock()
		e.flavor = flavor
		e.mu.Unlock()
	}
	if flavor == "mariadb" {
		return privs + ", DELETE HISTORY", nil
	}
	return privs, nil
}

// readOnlyPrivs is what a writer keeps over its quota: SELECT, and DELETE and DROP (DROP TABLE,
// TRUNCATE TABLE) so it can free space, and drop a table the server cannot measure (see
// mysqlMeasuredEngines). DROP creates nothing and grows nothing.
const readOnlyPrivs = "SELECT, DELETE, DROP, SHOW VIEW"

// SetReadOnly revokes every write privilege but keeps SELECT, DELETE and DROP, so the owner can
// free space; switching back grants everything again. It applies to every user that writes to the
// database (the owner and full-access credentials), not only the owner: a full-access
// credential has its own grants. Read-only credentials (SELECT, SHOW VIEW, never DELETE) are
// left alone both ways.
func (e *mysqlEngine) SetReadOnly(ctx context.Context, dbName, role string, readOnly bool) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if err := e.escapeGrants(ctx, dbName); err != nil {
		return err
	}
	q := "SELECT User FROM mysql.db WHERE Db = ? AND Host = '%' AND Insert_priv = 'Y'"
	if !readOnly {
		q = "SELECT User FROM mysql.db WHERE Db = ? AND Host = '%' AND Insert_priv = 'N' AND Delete_priv = 'Y'"
	}
	rows, err := e.pool.QueryContext(ctx, q, grantDB(dbName))
	if err != nil {
		return fmt.Errorf("mysql: list writers: %w", err)
	}
	users := []string{role}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			rows.Close()
			return fmt.Errorf("mysql: list writers: %w", err)
		}
		if u != role && SafeName.MatchString(u) {
			users = append(users, u)
		}
	}
	rows.Close()
	privs, err := e.writerPrivs(ctx)
	if err != nil {
		return err
	}
	for _, u := range users {
		if !readOnly {
			if err := e.exec(ctx, fmt.Sprintf("GRANT %s ON %s TO %s", privs, onSchema(dbName), mqa(u))); err != nil {
				return err
			}
			continue
		}
		if err := e.exec(ctx,
			fmt.Sprintf("REVOKE ALL PRIVILEGES ON %s FROM %s", onSchema(dbName), mqa(u)),
			fmt.Sprintf("GRANT %s ON %s TO %s", readOnlyPrivs, onSchema(dbName), mqa(u))); err != nil {
			return err
		}
		if err := e.kill(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

func (e *mysqlEngine) Usage(ctx context.Context, dbs []string) (map[string]Usage, error) {
	out := map[string]Usage{}
	if len(dbs) == 0 {
		return out, nil
	}
	e.mu.Lock()
	escaped := e.grantsEscaped
	e.mu.Unlock()
	if !escaped { // the refresher's first run escapes the grants of an existing server
		if err := e.escapeGrants(ctx, dbs...); err != nil {
			return nil, err
		}
		e.mu.Lock()
		e.grantsEscaped = true
		e.mu.Unlock()
	}
	e.mu.Lock()
	revoked := e.eventsRevoked
	e.mu.Unlock()
	if !revoked { // and takes EVENT from users granted everything before writerPrivs
		if err := e.revokeEvents(ctx, dbs); err != nil {
			return nil, err
		}
		e.mu.Lock()
		e.eventsRevoked = true
		e.mu.Unlock()
	}
	e.mu.Lock()
	limited := e.limitsSet
	e.mu.Unlock()
	if !limited { // and gives the users made before the limit existed theirs
		if err := e.limitUsers(ctx, dbs); err != nil {
			return nil, err
		}
		e.mu.Lock()
		e.limitsSet = true
		e.mu.Unlock()
	}
	args := make([]any, 0, len(dbs))
	marks := strings.TrimSuffix(strings.Repeat("?,", len(dbs)), ",")
	for _, d := range dbs {
		args = append(args, d)
	}
	ts, err := e.tablespaceTable(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := e.pool.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("mysql usage: %w", err)
	}
	defer conn.Close()
	// MySQL 8 caches the figures of information_schema.tables for a day by default (and ANALYZE
	// TABLE, which a writable tenant may run, fills the cache): this session reads them afresh.
	// MariaDB and MySQL 5.7 have no such cache (error 1193, unknown variable).
	_, err = conn.ExecContext(ctx, "SET SESSION information_schema_stats_expiry = 0")
	switch {
	case err == nil:
		defer func() {
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION information_schema_stats_expiry = DEFAULT"); err != nil {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	case !isMySQLCode(err, 1193):
		return nil, fmt.Errorf("mysql usage: %w", err)
	}
	rows, err := conn.QueryContext(ctx, `
		SELECT s.schema_name, `+mysqlSchemaBytes(ts)+`,
		       EXISTS (SELECT 1 FROM information_schema.processlist p WHERE p.db = s.schema_name)
		FROM information_schema.schemata s `+mysqlFilesJoin(ts)+` WHERE s.schema_name IN (`+marks+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("mysql usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var u Usage
		if err := rows.Scan(&name, &u.Bytes, &u.Active); err != nil {
			return nil, fmt.Errorf("mysql usage: %w", err)
		}
		out[name] = u
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql usage: %w", err)
	}
	rows.Close()
	return out, e.unmeasured(ctx, conn, out, marks, args)
}

// mysqlMeasuredEngines are the storage engines whose tables' size information_schema.tables
// reports (data_length, index_length), compared in upper case: InnoDB (and its files, see
// mysqlFilesJoin), MyISAM and Aria (their data and index files), MEMORY (its allocated blocks),
// MRG_MyISAM (the sum of the MyISAM tables it merges, each also counted where it lives),
// ARCHIVE (its data file's size), BLACKHOLE (stores nothing) and SEQUENCE (MariaDB's virtual
// seq_1_to_N; a CREATE SEQUENCE table is InnoDB or Aria). Any other engine, CSV first of all
// (data_length is always 0 while its .CSV file grows without bound), but also CONNECT,
// FEDERATED, S3, SPIDER, ROCKSDB and whatever plugin a server loads, is unmeasured.
var mysqlMeasuredEngines = []string{"INNODB", "MYISAM", "ARIA", "MEMORY", "MRG_MYISAM", "ARCHIVE", "BLACKHOLE", "SEQUENCE"}

// unmeasured records in out each schema's tables in an engine outside mysqlMeasuredEngines
// (views have no engine), at most 20 a schema.
func (e *mysqlEngine) unmeasured(ctx context.Context, conn *sql.Conn, out map[string]Usage, marks string, args []any) error {
	engines := make([]any, 0, len(args)+len(mysqlMeasuredEngines))
	engines = append(engines, args...)
	for _, m := range mysqlMeasuredEngines {
		engines = append(engines, m)
	}
	rows, err := conn.QueryContext(ctx, `SELECT table_schema, table_name, engine FROM information_schema.tables
		WHERE table_schema IN (`+marks+`) AND engine IS NOT NULL
		  AND UPPER(engine) NOT IN (`+strings.TrimSuffix(strings.Repeat("?,", len(mysqlMeasuredEngines)), ",")+`)
		ORDER BY table_schema, table_name`, engines...)
	if err != nil {
		return fmt.Errorf("mysql usage: unmeasured tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var schema, table, engine string
		if err := rows.Scan(&schema, &table, &engine); err != nil {
			return fmt.Errorf("mysql usage: unmeasured tables: %w", err)
		}
		u, ok := out[schema]
		if !ok || len(u.Unmeasured) >= 20 {
			continue
		}
		u.Unmeasured = append(u.Unmeasured, fmt.Sprintf("%s (%s)", table, engine))
		out[schema] = u
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql usage: unmeasured tables: %w", err)
	}
	return nil
}

// RefreshStats brings InnoDB's statistics of the schemas' tables up to date (ANALYZE TABLE), so
// that their data_length reflects rows deleted since: InnoDB refreshes them only now and then,
// and a read-only tenant may not run ANALYZE itself, so it stayed read-only after emptying its
// tables. Only InnoDB base tables are analyzed (MyISAM and Aria figures are exact); ANALYZE reads
// sampled index pages, writes nothing of the tenant's and runs no trigger. Names are quoted; the
// session waits at most 2 s for a table's lock (a tenant's open transaction) and it stops when ctx
// ends. Not replicated (NO_WRITE_TO_BINLOG).
func (e *mysqlEngine) RefreshStats(ctx context.Context, dbs []string) error {
	var schemas []any
	for _, d := range dbs {
		if SafeName.MatchString(d) {
			schemas = append(schemas, d)
		}
	}
	if len(schemas) == 0 {
		return nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(schemas)), ",")
	rows, err := e.pool.QueryContext(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_schema IN (`+marks+`) AND table_type = 'BASE TABLE' AND engine = 'InnoDB'`, schemas...)
	if err != nil {
		return fmt.Errorf("mysql: list tables: %w", err)
	}
	var tables []string
	for rows.Next() {
		var s, t string
		if err := rows.Scan(&s, &t); err != nil {
			rows.Close()
			return fmt.Errorf("mysql: list tables: %w", err)
		}
		tables = append(tables, mqi(s)+"."+mqi(t))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql: list tables: %w", err)
	}
	if len(tables) == 0 {
		return nil
	}
	conn, err := e.pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 2"); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	defer func() {
		// The connection goes back to the pool: its own setting again, or it is discarded.
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION lock_wait_timeout = DEFAULT"); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	const batch = 32
	for len(tables) > 0 {
		n := min(batch, len(tables))
		res, err := conn.QueryContext(ctx, "ANALYZE NO_WRITE_TO_BINLOG TABLE "+strings.Join(tables[:n], ", "))
		if err != nil {
			return fmt.Errorf("mysql: analyze: %w", err)
		}
		for res.Next() { // one row per table: a table dropped meanwhile is a row, not an error
		}
		res.Close()
		if err := res.Err(); err != nil {
			return fmt.Errorf("mysql: analyze: %w", err)
		}
		tables = tables[n:]
	}
	return nil
}

// revokeEvents takes the EVENT privilege (see writerPrivs) from every user@'%' that has it on one
// of the schemas dbs (escaped names: escapeGrants has run). Events made before stay as they are.
func (e *mysqlEngine) revokeEvents(ctx context.Context, dbs []string) error {
	var schemas []any
	for _, d := range dbs {
		if SafeName.MatchString(d) {
			schemas = append(schemas, grantDB(d))
		}
	}
	if len(schemas) == 0 {
		return nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(schemas)), ",")
	rows, err := e.pool.QueryContext(ctx, "SELECT Db, User FROM mysql.db WHERE Host = '%' AND Event_priv = 'Y' AND Db IN ("+marks+")", schemas...)
	if err != nil {
		return fmt.Errorf("mysql: list event grants: %w", err)
	}
	var grants [][2]string
	for rows.Next() {
		var db, user string
		if err := rows.Scan(&db, &user); err != nil {
			rows.Close()
			return fmt.Errorf("mysql: list event grants: %w", err)
		}
		if SafeName.MatchString(user) {
			grants = append(grants, [2]string{db, user})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql: list event grants: %w", err)
	}
	for _, g := range grants {
		// g[0] is the stored (escaped) name: quote it as it is.
		if err := e.exec(ctx, fmt.Sprintf("REVOKE EVENT ON %s.* FROM %s", mqi(g[0]), mqa(g[1]))); err != nil && !isMySQLCode(err, 1141) {
			return err
		}
	}
	return nil
}

// ServerWarnings tells which settings of the server let a tenant reach beyond its schema or its
// pause (see mysqlSettingWarnings).
func (e *mysqlEngine) ServerWarnings(ctx context.Context) ([]string, error) {
	vars := map[string]string{}
	for _, name := range []string{"have_symlink", "event_scheduler"} {
		var v string
		if err := e.pool.QueryRowContext(ctx, "SELECT @@GLOBAL."+name).Scan(&v); err != nil {
			if isMySQLCode(err, 1193) { // not a variable of this server: nothing to warn about
				continue
			}
			return nil, fmt.Errorf("mysql: read %s: %w", name, err)
		}
		vars[name] = v
	}
	return mysqlSettingWarnings(vars), nil
}

// mysqlSettingWarnings are the warnings about the server's settings vars (name: value).
func mysqlSettingWarnings(vars map[string]string) []string {
	var out []string
	if strings.EqualFold(vars["have_symlink"], "YES") {
		out = append(out, "MySQL/MariaDB server has symbolic links enabled (have_symlink=YES): a tenant can "+
			"CREATE TABLE … DATA DIRECTORY / INDEX DIRECTORY and place files anywhere mysqld may write; set "+
			"symbolic-links=0 (skip-symbolic-links) in the server's configuration")
	}
	if v := strings.ToUpper(vars["event_scheduler"]); v == "ON" || v == "1" {
		out = append(out, "MySQL/MariaDB server runs events (event_scheduler=ON): an event runs as its definer "+
			"even while the definer's account is locked, so events a tenant made before tenants lost the EVENT "+
			"privilege keep running while its database is paused; set event_scheduler=OFF (or DISABLED) in the "+
			"server's configuration")
	}
	return out
}

// limitUsers gives MAX_USER_CONNECTIONS maxConns to every user@'%' with privileges on one of the
// schemas dbs (their owners and access credentials) that has another limit, such as users made
// before there was one.
func (e *mysqlEngine) limitUsers(ctx context.Context, dbs []string) error {
	var schemas []any
	for _, d := range dbs {
		if SafeName.MatchString(d) {
			schemas = append(schemas, grantDB(d), d)
		}
	}
	if len(schemas) == 0 {
		return nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(schemas)), ",")
	args := append([]any{e.maxConns}, schemas...)
	rows, err := e.pool.QueryContext(ctx, `SELECT DISTINCT u.User FROM mysql.user u JOIN mysql.db d ON d.User = u.User AND d.Host = u.Host
		WHERE u.Host = '%' AND u.max_user_connections <> ? AND d.Db IN (`+marks+`)`, args...)
	if err != nil {
		return fmt.Errorf("mysql: list users: %w", err)
	}
	var users []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			rows.Close()
			return fmt.Errorf("mysql: list users: %w", err)
		}
		if SafeName.MatchString(u) {
			users = append(users, u)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql: list users: %w", err)
	}
	for _, u := range users {
		if err := e.exec(ctx, fmt.Sprintf("ALTER USER %s%s", mqa(u), e.limit)); err != nil && !isMySQLCode(err, 1396) {
			return err
		}
	}
	return nil
}

// mysqlSchemaBytes is the space a schema s takes: its tables' data and indexes (for MyISAM and
// Aria less the space of deleted rows, data_free, which their next inserts reuse), and the
// definitions of its stored routines (body, parameter and return types, comment), views,
// triggers and events, which the server keeps outside the tables (mysql.proc, .frm and .TRG
// files, mysql.event) and which a tenant could otherwise fill without limit. Every figure is in
// bytes of the stored text.
//
// InnoDB's data_length and index_length are statistics: refreshed only now and then, and never
// for a table the tenant made with STATS_AUTO_RECALC=0 (or STATS_PERSISTENT=1 and the server's
// innodb_stats_auto_recalc off), which kept them at an empty table's 16 KiB while the tenant
// wrote gigabytes. So the schema's InnoDB tables count at least what their tablespace files
// (ts, one per table or partition, named "<schema>/…"; see mysqlFilesJoin as f) take on disk
// less their free extents, data_free, which InnoDB reads from the file's header each time (it
// holds a few extents back as a reserve, so a file of more than a few MiB counts 2–4 MiB more
// than its pages hold): the larger of the two sums. Neither the tenant nor a stale statistic
// can make the file smaller than what it holds. Without ts (no InnoDB) the statistics alone.
func mysqlSchemaBytes(ts string) string {
	files := "0"
	if ts != "" {
		files = "COALESCE(f.file_bytes, 0)"
	}
	return `COALESCE((SELECT
		           COALESCE(SUM(CASE WHEN t.engine = 'InnoDB' THEN 0 ELSE t.data_length + t.index_length -
		             CASE WHEN t.engine IN ('MyISAM', 'Aria') THEN COALESCE(t.data_free, 0) ELSE 0 END END), 0)
		           + GREATEST(COALESCE(SUM(CASE WHEN t.engine = 'InnoDB' THEN t.data_length + t.index_length ELSE 0 END), 0),
		                      ` + files + ` - COALESCE(SUM(CASE WHEN t.engine = 'InnoDB' THEN COALESCE(t.data_free, 0) ELSE 0 END), 0))
		         FROM information_schema.tables t WHERE t.table_schema = s.schema_name), 0)
		     + COALESCE((SELECT SUM(COALESCE(LENGTH(r.routine_definition), 0) + COALESCE(LENGTH(r.routine_comment), 0))
		         FROM information_schema.routines r WHERE r.routine_schema = s.schema_name), 0)
		     + COALESCE((SELECT SUM(COALESCE(LENGTH(p.dtd_identifier), 0) + COALESCE(LENGTH(p.parameter_name), 0))
		         FROM information_schema.parameters p WHERE p.specific_schema = s.schema_name), 0)
		     + COALESCE((SELECT SUM(COALESCE(LENGTH(v.view_definition), 0))
		         FROM information_schema.views v WHERE v.table_schema = s.schema_name), 0)
		     + COALESCE((SELECT SUM(COALESCE(LENGTH(g.action_statement), 0))
		         FROM information_schema.triggers g WHERE g.trigger_schema = s.schema_name), 0)
		     + COALESCE((SELECT SUM(COALESCE(LENGTH(v.event_definition), 0) + COALESCE(LENGTH(v.event_comment), 0))
		         FROM information_schema.events v WHERE v.event_schema = s.schema_name), 0)`
}

// mysqlFilesJoin joins to schemata s the size of each schema's InnoDB tablespace files as
// f.file_bytes, read once for the whole server (one row per file, kept in memory by InnoDB).
// A file's name is "<schema>/<table>" (tables and partitions; a tenant schema's name needs no
// encoding); the shared system and undo tablespaces have no "/" and belong to no schema.
func mysqlFilesJoin(ts string) string {
	if ts == "" {
		return ""
	}
	return `LEFT JOIN (SELECT SUBSTRING_INDEX(i.name, '/', 1) AS schema_name, SUM(i.file_size) AS file_bytes
		FROM information_schema.` + ts + ` i WHERE i.name LIKE '%/%' GROUP BY SUBSTRING_INDEX(i.name, '/', 1)) f
		ON f.schema_name = s.schema_name`
}

// mysqlTablespaces are the information_schema tables that list InnoDB's tablespace files with a
// FILE_SIZE column: MySQL 8 (INNODB_TABLESPACES), MariaDB and MySQL 5.7 (INNODB_SYS_TABLESPACES).
var mysqlTablespaces = []string{"INNODB_TABLESPACES", "INNODB_SYS_TABLESPACES"}

// tablespaceTable finds which of mysqlTablespaces this server has, once ("" when none: InnoDB
// is not loaded, and the statistics alone count).
func (e *mysqlEngine) tablespaceTable(ctx context.Context) (string, error) {
	e.mu.Lock()
	ts := e.tablespaces
	e.mu.Unlock()
	if ts != "" {
		return strings.TrimPrefix(ts, "-"), nil
	}
	found := "-"
	for _, name := range mysqlTablespaces {
		var n int
		if err := e.pool.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns
			WHERE table_schema = 'information_schema' AND table_name = ? AND column_name IN ('NAME', 'FILE_SIZE')`, name).Scan(&n); err != nil {
			return "", fmt.Errorf("mysql: look up tablespaces: %w", err)
		}
		if n == 2 {
			found = name
			break
		}
	}
	e.mu.Lock()
	e.tablespaces = found
	e.mu.Unlock()
	return strings.TrimPrefix(found, "-"), nil
}

// MariaDB and MySQL 5.7 have no comment on a user, so the marks of credential users live in a
// table of the service's own on the server (no tenant is granted anything on it).
const mysqlMarks = "`provisioner_meta`.`credential_users`"

func (e *mysqlEngine) ensureMarks(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.marksReady {
		return nil
	}
	if err := e.exec(ctx, "CREATE DATABASE IF NOT EXISTS `provisioner_meta` CHARACTER SET utf8mb4",
		"CREATE TABLE IF NOT EXISTS "+mysqlMarks+" (user_name VARCHAR(80) NOT NULL PRIMARY KEY, marker VARCHAR(100) NOT NULL)"); err != nil {
		return err
	}
	e.marksReady = true
	return nil
}

// userMark tells whether user exists (on any host) and the mark recorded for it ("" if none).
func (e *mysqlEngine) userMark(ctx context.Context, user string) (bool, string, error) {
	if err := e.ensureMarks(ctx); err != nil {
		return false, "", err
	}
	var exists bool
	if err := e.pool.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM mysql.user WHERE user = ?)", user).Scan(&exists); err != nil {
		return false, "", fmt.Errorf("mysql: %w", err)
	}
	var mark string
	err := e.pool.QueryRowContext(ctx, "SELECT marker FROM "+mysqlMarks+" WHERE user_name = ?", user).Scan(&mark)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, "", fmt.Errorf("mysql: %w", err)
	}
	return exists, mark, nil
}

// credentialUser tells whether user exists; it is ErrRoleTaken when it does but was not made for
// the credential of marker. A user without any mark, made before users were marked, is that
// credential's (and is marked now) only when it has exactly the footprint the service gave the
// credential users it made then: one account, user@'%', that is not dbName's own login user
// (named after the database), with USAGE on *.* and privileges on every table of dbName's schema
// (named escaped or not) and nothing else, none with GRANT OPTION. A tenant's owner, a role, or
// a user made by hand that has anything elsewhere is never taken for one.
func (e *mysqlEngine) credentialUser(ctx context.Context, dbName, user, marker string) (bool, error) {
	exists, mark, err := e.userMark(ctx, user)
	if err != nil || !exists {
		return false, err
	}
	if mark == marker {
		return true, nil
	}
	if mark != "" || user == dbName {
		return false, ErrRoleTaken
	}
	var accounts int
	var anyHost bool
	if err := e.pool.QueryRowContext(ctx, "SELECT COUNT(*), COALESCE(MAX(host = '%'), 0) FROM mysql.user WHERE user = ?", user).
		Scan(&accounts, &anyHost); err != nil {
		return false, fmt.Errorf("mysql: %w", err)
	}
	if accounts != 1 || !anyHost {
		return false, ErrRoleTaken
	}
	rows, err := e.pool.QueryContext(ctx, "SHOW GRANTS FOR "+mqa(user))
	if err != nil {
		return false, fmt.Errorf("mysql: grants of %s: %w", user, err)
	}
	var grants []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			rows.Close()
			return false, fmt.Errorf("mysql: grants of %s: %w", user, err)
		}
		grants = append(grants, g)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("mysql: grants of %s: %w", user, err)
	}
	onSchemas := []string{" ON " + mqi(dbName) + ".* TO ", " ON " + onSchema(dbName) + " TO "}
	onDB := false
	for _, g := range grants {
		switch {
		case strings.Contains(g, "WITH GRANT OPTION"):
			return false, ErrRoleTaken
		case strings.HasPrefix(g, "GRANT USAGE ON *.* TO "):
		case strings.HasPrefix(g, "GRANT ") && (strings.Contains(g, onSchemas[0]) || strings.Contains(g, onSchemas[1])):
			onDB = true
		default:
			return false, ErrRoleTaken
		}
	}
	if !onDB {
		return false, ErrRoleTaken
	}
	if _, err := e.pool.ExecContext(ctx, "REPLACE INTO "+mysqlMarks+" (user_name, marker) VALUES (?, ?)", user, marker); err != nil {
		return false, fmt.Errorf("mysql: mark user: %w", err)
	}
	return true, nil
}

func (e *mysqlEngine) RoleExists(ctx context.Context, user string) (bool, error) {
	var exists bool
	if err := e.pool.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM mysql.user WHERE user = ?)", user).Scan(&exists); err != nil {
		return false, fmt.Errorf("mysql: %w", err)
	}
	return exists, nil
}

// ensureMarkedUser records the mark, then creates the user; a user of that name that exists
// without this mark is ErrRoleTaken. A crash between the two leaves a mark for a user that does
// not exist, which the retry uses.
func (e *mysqlEngine) ensureMarkedUser(ctx context.Context, user, password, marker string) error {
	exists, mark, err := e.userMark(ctx, user)
	if err != nil {
		return err
	}
	if exists {
		if mark != marker {
			return ErrRoleTaken
		}
		return e.exec(ctx, fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s%s", mqa(user), ql(password), e.limit))
	}
	if _, err := e.pool.ExecContext(ctx, "REPLACE INTO "+mysqlMarks+" (user_name, marker) VALUES (?, ?)", user, marker); err != nil {
		return fmt.Errorf("mysql: mark user: %w", err)
	}
	err = e.exec(ctx, fmt.Sprintf("CREATE USER %s IDENTIFIED BY %s%s", mqa(user), ql(password), e.limit))
	if isMySQLCode(err, 1396) { // created concurrently by someone else: not ours
		_, _ = e.pool.ExecContext(ctx, "DELETE FROM "+mysqlMarks+" WHERE user_name = ? AND marker = ?", user, marker)
		return ErrRoleTaken
	}
	return err
}

// writable tells whether role may write to dbName now (false while it is over its quota).
func (e *mysqlEngine) writable(ctx context.Context, dbName, role string) (bool, error) {
	var ins string
	err := e.pool.QueryRowContext(ctx, "SELECT Insert_priv FROM mysql.db WHERE Db = ? AND User = ? AND Host = '%'", grantDB(dbName), role).Scan(&ins)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("mysql: %w", err)
	}
	return ins == "Y", nil
}

func (e *mysqlEngine) CreateUser(ctx context.Context, dbName, owner, user, password string, readOnly bool, marker string) error {
	if err := checkNames(dbName, owner, user); err != nil {
		return err
	}
	if err := e.ensureMarkedUser(ctx, user, password, marker); err != nil {
		return err
	}
	if err := e.escapeGrants(ctx, dbName); err != nil {
		return err
	}
	privs, err := e.writerPrivs(ctx)
	if err != nil {
		return err
	}
	if readOnly {
		privs = "SELECT, SHOW VIEW"
	} else if ok, err := e.writable(ctx, dbName, owner); err != nil {
		return err
	} else if !ok {
		privs = readOnlyPrivs // over quota: what the owner has now; SetReadOnly gives ALL back to both
	}
	return e.exec(ctx, fmt.Sprintf("GRANT %s ON %s TO %s", privs, onSchema(dbName), mqa(user)))
}

func (e *mysqlEngine) SetPassword(ctx context.Context, dbName, user, password, marker string) error {
	if err := checkNames(dbName, user); err != nil {
		return err
	}
	ok, err := e.credentialUser(ctx, dbName, user, marker)
	if err != nil {
		return err
	}
	if !ok {
		return ErrRoleTaken
	}
	return e.exec(ctx, fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s%s", mqa(user), ql(password), e.limit))
}

func (e *mysqlEngine) SetUserLogin(ctx context.Context, dbName, user, marker string, enabled bool) error {
	if err := checkNames(dbName, user); err != nil {
		return err
	}
	ok, err := e.credentialUser(ctx, dbName, user, marker)
	if err != nil || !ok {
		return err
	}
	lock := " ACCOUNT LOCK"
	if enabled {
		lock = e.limit + " ACCOUNT UNLOCK"
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER USER %s%s", mqa(user), lock)); err != nil {
		if isMySQLCode(err, 1396) { // dropped meanwhile
			return nil
		}
		return err
	}
	if enabled {
		return nil
	}
	return e.kill(ctx, user)
}

// DropUser implements Engine. As Drop does, it locks the user's account before ending its
// sessions: MariaDB and MySQL do not end the sessions of a user they drop, so a client that
// logged in again between KILL and DROP USER (a pool reconnects at once) kept a session that
// outlived the credential. Repeatable: a retry after a failure in between finds the account
// locked and its sessions ended again.
func (e *mysqlEngine) DropUser(ctx context.Context, dbName, user, marker string) error {
	if err := checkNames(dbName, user); err != nil {
		return err
	}
	exists, err := e.credentialUser(ctx, dbName, user, marker) // never drop a user this credential did not make
	if err != nil {
		return err
	}
	if exists {
		if err := e.exec(ctx, fmt.Sprintf("ALTER USER IF EXISTS %s ACCOUNT LOCK", mqa(user))); err != nil {
			return err
		}
		if err := e.kill(ctx, user); err != nil {
			return err
		}
		if err := e.exec(ctx, fmt.Sprintf("DROP USER IF EXISTS %s", mqa(user))); err != nil {
			return err
		}
	}
	if _, err := e.pool.ExecContext(ctx, "DELETE FROM "+mysqlMarks+" WHERE user_name = ? AND marker = ?", user, marker); err != nil {
		return fmt.Errorf("mysql: unmark user: %w", err)
	}
	return nil
}

func (e *mysqlEngine) ConnectionString(dbName, user, password string) string {
	return fmt.Sprintf("mysql://%s:%s@%s/%s", user, password, net.JoinHostPort(e.host, strconv.Itoa(e.port)), dbName)
}

// escapeGrants moves the grants made before schema names were escaped (on the pattern u1_x,
// which also matched u1ax) to the escaped name, with the same privileges: the three sets this
// engine grants are told apart by INSERT (all privileges) and DELETE (over the quota). It is
// repeatable and does nothing once no such grant is left.
func (e *mysqlEngine) escapeGrants(ctx context.Context, dbNames ...string) error {
	var legacy []any
	for _, d := range dbNames {
		if grantDB(d) != d && SafeName.MatchString(d) {
			legacy = append(legacy, d)
		}
	}
	if len(legacy) == 0 {
		return nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(legacy)), ",")
	rows, err := e.pool.QueryContext(ctx, "SELECT Db, User, Insert_priv, Delete_priv FROM mysql.db WHERE Host = '%' AND Db IN ("+marks+")", legacy...)
	if err != nil {
		return fmt.Errorf("mysql: list unescaped grants: %w", err)
	}
	type grant struct{ db, user, privs string }
	var grants []grant
	writer, err := e.writerPrivs(ctx)
	if err != nil {
		return err
	}
	for rows.Next() {
		var g grant
		var ins, del string
		if err := rows.Scan(&g.db, &g.user, &ins, &del); err != nil {
			rows.Close()
			return fmt.Errorf("mysql: list unescaped grants: %w", err)
		}
		switch {
		case ins == "Y":
			g.privs = writer
		case del == "Y":
			g.privs = readOnlyPrivs
		default:
			g.privs = "SELECT, SHOW VIEW"
		}
		if SafeName.MatchString(g.user) {
			grants = append(grants, g)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql: list unescaped grants: %w", err)
	}
	for _, g := range grants {
		if err := e.exec(ctx,
			fmt.Sprintf("GRANT %s ON %s TO %s", g.privs, onSchema(g.db), mqa(g.user)),
			fmt.Sprintf("REVOKE ALL PRIVILEGES ON %s.* FROM %s", mqi(g.db), mqa(g.user))); err != nil {
			return err
		}
	}
	return nil
}

func isMySQLCode(err error, code uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == code
}
