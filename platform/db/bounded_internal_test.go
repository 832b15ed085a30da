package db

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBoundedConnKeepsTheDeadlinePgxSets: pgx interrupts a query whose context ended by setting a
// deadline in the past; the next Read must honour it rather than replace it with the I/O bound.
// Once pgx clears its deadline, the bound applies again.
func TestBoundedConnKeepsTheDeadlinePgxSets(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &boundedConn{Conn: a, timeout: 3 * time.Second}
	buf := make([]byte, 1)

	require.NoError(t, c.SetDeadline(time.Now()))
	start := time.Now()
	_, err := c.Read(buf)
	require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "got %v", err)
	assert.Less(t, time.Since(start), time.Second)
	_, err = c.Write(buf)
	require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "got %v", err)

	c.timeout = 50 * time.Millisecond
	require.NoError(t, c.SetDeadline(time.Time{}))
	start = time.Now()
	_, err = c.Read(buf)
	require.True(t, errors.Is(err, os.ErrDeadlineExceeded), "the bound applies: got %v", err)
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
}
