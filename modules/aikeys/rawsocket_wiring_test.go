//go:build linux && !race

package aikeys

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Upstream connections are read and written through an httpx.RawSocket.
func TestUpstreamConnectionsUseRawSockets(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1))
		}
	}()
	c, err := dialStale(ln.Addr().String(), time.Second)
	require.NoError(t, err)
	defer c.Close()
	sc, ok := c.(*staleConn)
	require.True(t, ok)
	assert.NotNil(t, sc.raw, "an upstream connection is read and written with raw system calls")
}
