//go:build linux && !race

package httpx

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The server reads requests and writes answers through a RawSocket (see rawsocket_linux.go).
func TestServerConnectionsUseRawSockets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	sl := newServerListener(ln, defaultLinger)
	defer sl.Close()
	go func() {
		if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1))
		}
	}()
	c, err := sl.Accept()
	require.NoError(t, err)
	defer c.Close()
	sc, ok := c.(*serverConn)
	require.True(t, ok)
	assert.NotNil(t, sc.raw, "a TCP connection is read and written with raw system calls")
}
