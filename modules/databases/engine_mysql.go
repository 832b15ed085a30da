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
	// escapeGrants); checked once per process, by the first usage refresh to name them all.
	grantsEscaped bool
	// flavor: "mariadb" or "mysql" ("" until read).
	flavor string
	// eventsRevoked: no tenant user of the live databases has EVENT (set when a usage refresh
	// has named them all, see usagePass).
	eventsRevoked bool
	// limitsSet: every tenant user of the live databases has maxConns (likewise).
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
	sizeEnginePool(pool)
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

func (e *mysqlEngine) ID() string { return "mysql" }

func (e *mysqlEngine) Name() string { return "MySQL / MariaDB" }

func (e *mysqlEngine) Host() string { return e.host }

func (e *mysqlEngine) Port() int { return e.port }

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
// could otherwise take every connection of the server, the service's own included). The CREATE
// goes first: a fresh user costs one round trip; one that exists (ER_CANNOT_USER, 1396: a crash
// interrupted an earlier attempt) is altered instead.
func (e *mysqlEngine) ensureUser(ctx context.Context, user, password string) error {
	err := e.exec(ctx, fmt.Sprintf("CREATE USER %s IDENTIFIED BY %s%s", mqa(user), ql(password), e.limit))
	if isMySQLCode(err, 1396) {
		return e.exec(ctx, fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s%s", mqa(user), ql(password), e.limit))
	}
	return err
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
