package databases

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// EngineError is an engine's failure as it is stored (lastError) and shown (errorMessage): a
// short class ("engine unreachable", "engine timed out", "engine refused: SQLSTATE 55006"),
// never the statement, the admin role or the server's address. The full error is logged where
// it happens and kept for errors.Is/As.
type EngineError struct {
	Msg string
	err error
}

func (e *EngineError) Error() string { return e.Msg }
func (e *EngineError) Unwrap() error { return e.err }

// publicEngineMessage classifies an engine's error for users.
func publicEngineMessage(err error) string {
	var (
		pgErr   *pgconn.PgError
		myErr   *mysql.MySQLError
		netErr  net.Error
		connErr *pgconn.ConnectError
	)
	switch {
	case errors.As(err, &pgErr):
		return "engine refused: SQLSTATE " + pgErr.Code
	case errors.As(err, &myErr):
		return fmt.Sprintf("engine refused: error %d", myErr.Number)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "engine timed out"
	case errors.As(err, &connErr), errors.As(err, &netErr), errors.Is(err, driver.ErrBadConn), errors.Is(err, mysql.ErrInvalidConn):
		return "engine unreachable"
	case errors.Is(err, ErrRoleTaken):
		return "engine refused: a role of that name exists and was not made by this service"
	default:
		return "engine failed"
	}
}

// engineError logs err in full (engine errors carry statements with their passwords redacted)
// and returns it as an EngineError for storing and showing.
func engineError(ctx context.Context, log *slog.Logger, op string, id int64, err error) error {
	if err == nil {
		return nil
	}
	var ee *EngineError
	if errors.As(err, &ee) {
		return err
	}
	log.WarnContext(ctx, "database engine failed", "op", op, "database", id, "error", err.Error())
	return &EngineError{Msg: op + ": " + publicEngineMessage(err), err: err}
}
