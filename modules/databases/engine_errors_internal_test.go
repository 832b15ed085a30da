package databases

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
)

// TestPublicEngineMessage: each class of engine failure is shown by its class only; the
// statement, role and address in the wrapped error never are.
func TestPublicEngineMessage(t *testing.T) {
	stmt := `postgres: DROP DATABASE IF EXISTS "u1_abc" WITH (FORCE)`
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%s: %w", stmt, context.DeadlineExceeded), "engine timed out"},
		{fmt.Errorf("%s: %w", stmt, &pgconn.PgError{Code: "55006", Message: `database "u1_abc" is being accessed by other users`}), "engine refused: SQLSTATE 55006"},
		{fmt.Errorf("mysql: DROP USER 'u1'@'%%': %w", &mysql.MySQLError{Number: 1396, Message: "Operation DROP USER failed"}), "engine refused: error 1396"},
		{fmt.Errorf("mysql: %w", mysql.ErrInvalidConn), "engine unreachable"},
		{errors.New("something else at 10.0.0.1"), "engine failed"},
	} {
		assert.Equal(t, c.want, publicEngineMessage(c.err))
	}
}
