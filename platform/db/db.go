// Package db opens the control database (Bun on PostgreSQL), creates it when missing, and runs the
// SQL migrations that the platform and every module contribute.
package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/migrate"
	"go.uber.org/fx"

	"provisioner/platform/fault"
	"provisioner/platform/reqctx"
)

// Migrations is one module's embedded SQL migrations: files named
// <YYYYMMDDHHMMSS>_<name>.up.sql and .down.sql (".tx.up.sql" to run in a transaction). Names are
// global across modules, so the timestamp orders them; a module's tables come after the platform's.
type Migrations struct {
	Module string
	FS     fs.FS
	// Go are migrations written in Go, for what SQL cannot do (such as spelling stored emails as
	// platform/emailaddr does); ordered with the SQL files by their timestamps.
	Go []GoMigration
}

// GoMigration is a migration written in Go. Name is <YYYYMMDDHHMMSS>_<name>, unique like a file
// name; Up and Down each run in a transaction of their own; a nil Down has nothing to undo.
type GoMigration struct {
	Name     string
	Up, Down func(ctx context.Context, tx bun.Tx) error
}

// add registers g with ms, its steps in transactions of bdb.
func (g GoMigration) add(bdb *bun.DB, ms *migrate.Migrations) {
	stamp, comment, _ := strings.Cut(g.Name, "_")
	inTx := func(f func(context.Context, bun.Tx) error) func(context.Context, *migrate.Migrator, *migrate.Migration) error {
		if f == nil {
			return nil
		}
		return func(ctx context.Context, _ *migrate.Migrator, _ *migrate.Migration) error {
			return bdb.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return f(ctx, tx) })
		}
	}
	ms.Add(migrate.Migration{Name: stamp, Comment: comment, Up: inTx(g.Up), Down: inTx(g.Down)})
}

// AsMigrations provides a module's migrations to the platform's migrator.
func AsMigrations(f any) any {
	return fx.Annotate(f, fx.ResultTags(`group:"migrations"`))
}

// Open connects to the control database, creating the database first when it does not exist
// and the role may create it. The pool is sized for a 2-core machine.
func Open(ctx context.Context, dsn string) (*bun.DB, error) {
	if err := ensureDatabase(ctx, dsn); err != nil {
		return nil, err
	}
	conn, err := connector(dsn, logWarnings)
	if err != nil {
		return nil, err
	}
	sqldb := sql.OpenDB(conn)
	sqldb.SetMaxOpenConns(32)
	sqldb.SetMaxIdleConns(32)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	bdb := bun.NewDB(sqldb, pgdialect.New())
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := bdb.PingContext(pctx); err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("connect to control database %s: %w", Redact(dsn), err)
	}
	return bdb, nil
}

// ensureDatabase connects to the server's "postgres" database and creates the target database
// when it is missing.
func ensureDatabase(ctx context.Context, dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return fmt.Errorf("parse control database URL: invalid URL")
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" || name == "postgres" {
		return nil
	}
	admin := *u
	admin.Path = "/postgres"
	conn, err := Connector(admin.String())
	if err != nil {
		return err
	}
	sqldb := sql.OpenDB(conn)
	defer sqldb.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var exists bool
	if err := sqldb.QueryRowContext(cctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		// No access to the maintenance database: let the real connection report the problem.
		return nil
	}
	if exists {
		return nil
	}
	_, err = sqldb.ExecContext(cctx, "CREATE DATABASE "+QuoteIdent(name))
	if IsCode(err, "42P04") {
		return nil // created concurrently
	}
	if err != nil {
		return fmt.Errorf("create control database %q: %w", name, err)
	}
	return nil
}

// Connector builds a database/sql connector for PostgreSQL (pgx). A malformed DSN is an error
// that does not repeat the DSN (it may hold a password).
//
// Bun formats its statements itself and passes no arguments; arguments given directly ($1, …) are
// sent apart from the SQL text (QueryExecModeExec: never interpolated on the client, one round
// trip, no prepared statement left on the connection).
func Connector(dsn string) (driver.Connector, error) { return connector(dsn, nil) }

// logWarnings writes what the control database reports at WARNING severity to the process log:
// a data migration's RAISE WARNING (a row it left as it was, say) reaches the operator instead of
// being dropped by the driver. Lesser notices ("… does not exist, skipping") are still dropped.
func logWarnings(_ *pgconn.PgConn, n *pgconn.Notice) {
	if n.Severity == "WARNING" {
		slog.Default().Warn("control database: " + n.Message)
	}
}

// connector is Connector with a handler for the server's notices (nil: dropped).
func connector(dsn string, onNotice pgconn.NoticeHandler) (driver.Connector, error) {
	if _, ok := parseDSN(dsn); !ok && strings.Contains(dsn, "://") {
		// pgx would take part of it (the password, after an unencoded '/') for the database name
		// and quote that in every connection error.
		return nil, fmt.Errorf("connection string %s", Redact(dsn))
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("connection string %s: %s", Redact(dsn), parseReason(dsn, err))
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.OnNotice = onNotice
	cfg.AfterNetConnect = func(_ context.Context, _ *pgconn.Config, c net.Conn) (net.Conn, error) {
		return &boundedConn{Conn: c, timeout: ioTimeout}, nil
	}
	return stdlib.GetConnector(*cfg, stdlib.OptionAfterConnect(utcTimestamps)), nil
}

// utcTimestamps makes timestamptz values read back in UTC (pgx would give them in the process's
// local zone): the API's timestamps are UTC whatever TZ the service runs with, including rows a
// handler returns as they were read.
func utcTimestamps(_ context.Context, c *pgx.Conn) error {
	c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
		Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
	return nil
}

// ioTimeout bounds every read from and write to the server: a database that stops answering (a
// hung host, a silent network) fails the query instead of holding a request for ever, whatever
// its context says.
const ioTimeout = 5 * time.Second

// boundedConn applies ioTimeout to each Read and Write, unless pgx has set an earlier deadline (it
// sets one at once when a query's context ends, to interrupt it).
type boundedConn struct {
	net.Conn
	timeout time.Duration
	mu      sync.Mutex
	rd, wd  time.Time // the deadlines pgx set; zero: none
}

func (c *boundedConn) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rd, c.wd = t, t
	return c.Conn.SetDeadline(t)
}

func (c *boundedConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rd = t
	return c.Conn.SetReadDeadline(t)
}

func (c *boundedConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wd = t
	return c.Conn.SetWriteDeadline(t)
}

// earliest is now+timeout, or set when that comes first.
func (c *boundedConn) earliest(set time.Time) time.Time {
	d := time.Now().Add(c.timeout)
	if !set.IsZero() && set.Before(d) {
		return set
	}
	return d
}

func (c *boundedConn) Read(p []byte) (int, error) {
	c.mu.Lock() // held while setting, so a deadline pgx sets meanwhile is not overwritten
	_ = c.Conn.SetReadDeadline(c.earliest(c.rd))
	c.mu.Unlock()
	return c.Conn.Read(p)
}

func (c *boundedConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	_ = c.Conn.SetWriteDeadline(c.earliest(c.wd))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// parseReason is what pgx found wrong with dsn, when saying it cannot repeat the password: pgx
// quotes the part it could not parse, which for a malformed URL may be the password itself.
func parseReason(dsn string, err error) string {
	const generic = "not a valid PostgreSQL connection URL (postgres://user:password@host:port/database?sslmode=disable)"
	u, ok := parseDSN(dsn)
	var pe *pgconn.ParseConfigError
	if !ok || !errors.As(err, &pe) || pe.Unwrap() == nil {
		return generic
	}
	reason := pe.Unwrap().Error()
	pw, _ := u.User.Password()
	if qpw := u.Query().Get("password"); (pw != "" && strings.Contains(reason, pw)) || (qpw != "" && strings.Contains(reason, qpw)) {
		return generic
	}
	return reason
}

// IsCode reports whether err is a PostgreSQL error with the given SQLSTATE code.
func IsCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return err != nil && errors.As(err, &pgErr) && pgErr.Code == code
}

// QuoteIdent quotes a PostgreSQL identifier.
func QuoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}

// Redact removes the password from a connection URL for messages. A string that is not a
// well-formed URL is not shown at all: an unencoded '/', '?' or '#' in a password moves it out of
// the user info, where nothing could mask it.
func Redact(dsn string) string {
	u, ok := parseDSN(dsn)
	if !ok {
		return "(not a well-formed postgres:// URL; percent-encode special characters in the password)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// parseDSN parses a connection URL whose password, if any, sits where Redact masks it: in the
// user info or the password query parameter. It refuses fragments, opaque URLs and an '@' outside
// the user info (all signs of a password with an unencoded special character).
func parseDSN(dsn string) (*url.URL, bool) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" || u.Opaque != "" || u.Fragment != "" || strings.Contains(dsn, "#") {
		return nil, false
	}
	rest := *u
	rest.User = nil
	if strings.Contains(rest.String(), "@") {
		return nil, false
	}
	return u, true
}

// Migrator runs every contributed migration in timestamp order.
type Migrator struct {
	db *bun.DB
	m  *migrate.Migrator
}

// NewMigrator collects the migrations of the platform and every module.
func NewMigrator(bdb *bun.DB, sets []Migrations) (*Migrator, error) {
	ms := migrate.NewMigrations()
	seen := map[string]string{}   // SQL file names → module
	stamps := map[string]string{} // timestamps → module (Go) or "<module>'s SQL"
	for _, set := range sets {
		for _, g := range set.Go {
			stamp, _, _ := strings.Cut(g.Name, "_")
			if other, ok := stamps[stamp]; ok {
				return nil, fmt.Errorf("migration %s of %s clashes with %s", g.Name, set.Module, other)
			}
			stamps[stamp] = set.Module
			g.add(bdb, ms)
		}
		if set.FS == nil {
			continue
		}
		names, err := fs.Glob(set.FS, "*.sql")
		if err != nil {
			return nil, fmt.Errorf("list migrations of %s: %w", set.Module, err)
		}
		for _, n := range names {
			stamp, _, _ := strings.Cut(n, "_")
			other, ok := seen[n]
			if o := stamps[stamp]; o != "" && o != set.Module+"'s SQL" {
				other, ok = o, true // a Go migration, or another module's file, with this timestamp
			}
			if ok {
				return nil, fmt.Errorf("migration %s of %s clashes with %s", n, set.Module, other)
			}
			seen[n], stamps[stamp] = set.Module, set.Module+"'s SQL"
		}
		if err := ms.Discover(set.FS); err != nil {
			return nil, fmt.Errorf("discover migrations of %s: %w", set.Module, err)
		}
	}
	return &Migrator{db: bdb, m: migrate.NewMigrator(bdb, ms, migrate.WithMarkAppliedOnSuccess(true))}, nil
}

// advisoryKey serialises migrations across replicas starting at once.
const advisoryKey = 7_310_442_001

func (m *Migrator) locked(ctx context.Context, f func() error) error {
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock(?)", advisoryKey); err != nil {
		return fmt.Errorf("migration lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(?)", advisoryKey) //nolint:errcheck
	if err := m.m.Init(ctx); err != nil {
		return fmt.Errorf("init migrations table: %w", err)
	}
	return f()
}

// Up applies every pending migration and returns their names.
func (m *Migrator) Up(ctx context.Context) ([]string, error) {
	var names []string
	err := m.locked(ctx, func() error {
		g, err := m.m.Migrate(ctx)
		if err != nil {
			return fmt.Errorf("migrate up: %w", err)
		}
		for _, mg := range g.Migrations {
			names = append(names, mg.String())
		}
		return nil
	})
	return names, err
}

// Down rolls back the last applied group and returns the names rolled back.
func (m *Migrator) Down(ctx context.Context) ([]string, error) {
	var names []string
	err := m.locked(ctx, func() error {
		g, err := m.m.Rollback(ctx)
		if err != nil {
			return fmt.Errorf("migrate down: %w", err)
		}
		for _, mg := range g.Migrations {
			names = append(names, mg.String())
		}
		return nil
	})
	return names, err
}

// Status lists every migration with whether it is applied.
func (m *Migrator) Status(ctx context.Context) (applied, pending []string, err error) {
	err = m.locked(ctx, func() error {
		ms, err := m.m.MigrationsWithStatus(ctx)
		if err != nil {
			return fmt.Errorf("migration status: %w", err)
		}
		for _, mg := range ms {
			if mg.IsApplied() {
				applied = append(applied, mg.String())
			} else {
				pending = append(pending, mg.String())
			}
		}
		return nil
	})
	return applied, pending, err
}

// Migrated is a token: a constructor that needs the schema (a start hook reading tables) depends
// on it, so its hooks run after the migrations were applied.
type Migrated struct{}

// NewMigrated applies pending migrations when the application starts.
func NewMigrated(lc fx.Lifecycle, m *Migrator, log *slog.Logger) *Migrated {
	lc.Append(fx.StartHook(func(ctx context.Context) error {
		names, err := m.Up(ctx)
		if err != nil {
			return err
		}
		if len(names) > 0 {
			log.Info("migrations applied", "names", names)
		}
		return nil
	}))
	return &Migrated{}
}

// IsUniqueViolation reports whether err is PostgreSQL's unique_violation (23505).
func IsUniqueViolation(err error) bool { return IsCode(err, "23505") }

// RunInTx runs fn in a transaction of bdb that first checks the request's caller again and locks
// its users row (the reqctx.Caller's LockCaller, authn.LockCaller): a write made on behalf of a
// request is refused (401/403, nothing written) when its caller was deleted, demoted or had its
// password reset after the guard let the request in, and a deletion or demotion made meanwhile
// waits for the write to end. Every write of a request to the control database goes through it (or
// calls authn.LockCaller first in its own transaction); outside a request (no guarded principal)
// it is bun's RunInTx.
func RunInTx(ctx context.Context, bdb *bun.DB, fn func(ctx context.Context, tx bun.Tx) error) error {
	return bdb.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if c := reqctx.CallerOf(ctx); c != nil {
			if err := c.LockCaller(ctx, tx); err != nil {
				return err
			}
		}
		return fn(ctx, tx)
	})
}

// LockLiveUser locks the users row of a live (not deleted) account within tx, serialising the
// owner's concurrent creates so per-user quotas cannot be overrun. A missing or deleted account is
// UserGone: 401 when it is the request's own principal (deleted while the request was in
// flight), 404 "User not found" when an admin named it. FOR NO KEY UPDATE: it conflicts with
// itself and with a deletion's FOR UPDATE, not with the KEY SHARE lock authn.LockCaller took on
// the same row (the owner's own request), so two creates of one owner queue instead of deadlocking.
func LockLiveUser(ctx context.Context, tx bun.Tx, userID int64) error {
	var live bool
	err := tx.NewSelect().Table("users").ColumnExpr("deleted_at IS NULL").Where("id = ?", userID).For("NO KEY UPDATE").Scan(ctx, &live)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !live) {
		return UserGone(ctx, userID)
	}
	if err != nil {
		return fmt.Errorf("lock user %d: %w", userID, err)
	}
	return nil
}

// UserGone is the error for an account found missing or deleted while a request is served (a
// lookup of the user's row by id). When it is the request's own caller, the account was deleted
// after the guard let the request in (its cached principal had not heard of the deletion yet):
// the token's subject no longer exists, so the answer is the guard's own 401
// (reqctx.Caller.GoneError), never a 404 about the caller. Anyone else's account (an admin naming
// a user) is a 404 "User not found".
func UserGone(ctx context.Context, userID int64) error {
	if c := reqctx.CallerOf(ctx); c != nil && c.CallerID() == userID {
		return c.GoneError()
	}
	return fault.NotFound("User not found")
}
