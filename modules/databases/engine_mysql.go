package databases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"provisioner/platform/config"
)

// mysqlEngine hosts tenant databases on a MySQL or MariaDB server through an admin connection.
type mysqlEngine struct {
	pool *sql.DB
	host string
	port int
}

func newMySQL(dsn string, pub config.EnginePublic) (*mysqlEngine, error) {
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
	e := &mysqlEngine{pool: pool, host: "127.0.0.1", port: 3306}
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

func (e *mysqlEngine) exec(ctx context.Context, stmts ...string) error {
	for _, s := range stmts {
		if _, err := e.pool.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("mysql: %s: %w", redactStmt(strings.Replace(s, "IDENTIFIED BY", "PASSWORD", 1)), err)
		}
	}
	return nil
}

func (e *mysqlEngine) ensureUser(ctx context.Context, user, password string) error {
	return e.exec(ctx,
		fmt.Sprintf("CREATE USER IF NOT EXISTS %s IDENTIFIED BY %s", mqa(user), ql(password)),
		fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s", mqa(user), ql(password)))
}

func (e *mysqlEngine) Create(ctx context.Context, dbName, role, password string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if err := e.ensureUser(ctx, role, password); err != nil {
		return err
	}
	return e.exec(ctx,
		fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s CHARACTER SET utf8mb4", mqi(dbName)),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON %s.* TO %s", mqi(dbName), mqa(role)))
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

func (e *mysqlEngine) Drop(ctx context.Context, dbName, role string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if err := e.kill(ctx, role); err != nil {
		return err
	}
	return e.exec(ctx,
		fmt.Sprintf("DROP DATABASE IF EXISTS %s", mqi(dbName)),
		fmt.Sprintf("DROP USER IF EXISTS %s", mqa(role)))
}

func (e *mysqlEngine) SetLogin(ctx context.Context, dbName, role string, enabled bool) error {
	if err := checkNames(role); err != nil {
		return err
	}
	if enabled {
		return e.exec(ctx, fmt.Sprintf("ALTER USER %s ACCOUNT UNLOCK", mqa(role)))
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER USER %s ACCOUNT LOCK", mqa(role))); err != nil {
		return err
	}
	return e.kill(ctx, role)
}

// SetReadOnly revokes every write privilege but keeps SELECT and DELETE, so the owner can free
// space; switching back grants everything again.
func (e *mysqlEngine) SetReadOnly(ctx context.Context, dbName, role string, readOnly bool) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if !readOnly {
		return e.exec(ctx, fmt.Sprintf("GRANT ALL PRIVILEGES ON %s.* TO %s", mqi(dbName), mqa(role)))
	}
	if err := e.exec(ctx,
		fmt.Sprintf("REVOKE ALL PRIVILEGES ON %s.* FROM %s", mqi(dbName), mqa(role)),
		fmt.Sprintf("GRANT SELECT, DELETE, SHOW VIEW ON %s.* TO %s", mqi(dbName), mqa(role))); err != nil {
		return err
	}
	return e.kill(ctx, role)
}

func (e *mysqlEngine) Usage(ctx context.Context, dbs []string) (map[string]Usage, error) {
	out := map[string]Usage{}
	if len(dbs) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(dbs))
	marks := strings.TrimSuffix(strings.Repeat("?,", len(dbs)), ",")
	for _, d := range dbs {
		args = append(args, d)
	}
	rows, err := e.pool.QueryContext(ctx, `
		SELECT s.schema_name,
		       COALESCE((SELECT SUM(t.data_length + t.index_length) FROM information_schema.tables t WHERE t.table_schema = s.schema_name), 0),
		       EXISTS (SELECT 1 FROM information_schema.processlist p WHERE p.db = s.schema_name)
		FROM information_schema.schemata s WHERE s.schema_name IN (`+marks+`)`, args...)
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
	return out, rows.Err()
}

func (e *mysqlEngine) CreateUser(ctx context.Context, dbName, owner, user, password string, readOnly bool) error {
	if err := checkNames(dbName, owner, user); err != nil {
		return err
	}
	if err := e.ensureUser(ctx, user, password); err != nil {
		return err
	}
	privs := "ALL PRIVILEGES"
	if readOnly {
		privs = "SELECT, SHOW VIEW"
	}
	return e.exec(ctx, fmt.Sprintf("GRANT %s ON %s.* TO %s", privs, mqi(dbName), mqa(user)))
}

func (e *mysqlEngine) SetPassword(ctx context.Context, user, password string) error {
	if err := checkNames(user); err != nil {
		return err
	}
	return e.exec(ctx, fmt.Sprintf("ALTER USER %s IDENTIFIED BY %s", mqa(user), ql(password)))
}

func (e *mysqlEngine) DropUser(ctx context.Context, dbName, user string) error {
	if err := checkNames(user); err != nil {
		return err
	}
	if err := e.kill(ctx, user); err != nil {
		return err
	}
	return e.exec(ctx, fmt.Sprintf("DROP USER IF EXISTS %s", mqa(user)))
}

func (e *mysqlEngine) ConnectionString(dbName, user, password string) string {
	return fmt.Sprintf("mysql://%s:%s@%s/%s", user, password, net.JoinHostPort(e.host, strconv.Itoa(e.port)), dbName)
}

func isMySQLCode(err error, code uint16) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == code
}
