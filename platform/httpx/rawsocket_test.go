//go:build linux && !race

package httpx_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/httpx"
)

// tcpPair answers both ends of a fresh loopback TCP connection: the dialled one and the accepted one.
func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	s := <-accepted
	require.NotNil(t, s)
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// conns are the two ways to read and write a connection: net.Conn's own and RawSocket's. Every
// test below runs on both and expects the same.
func conns(t *testing.T, c *net.TCPConn) map[string]io.ReadWriter {
	raw := httpx.NewRawSocket(c)
	require.NotNil(t, raw, "a TCP connection has a raw socket")
	return map[string]io.ReadWriter{"net.Conn": c, "RawSocket": raw}
}

func TestRawSocketMovesLargePayloadsBothWays(t *testing.T) {
	for _, way := range []string{"net.Conn", "RawSocket"} {
		t.Run(way, func(t *testing.T) {
			c, s := tcpPair(t)
			// Buffers far smaller than the payload, and a reader that starts late: the write
			// fills them, returns partly written and waits for room (EAGAIN) again and again.
			require.NoError(t, c.SetWriteBuffer(64<<10))
			require.NoError(t, s.SetReadBuffer(64<<10))
			rw := conns(t, c)[way]
			payload := make([]byte, 8<<20)
			_, _ = rand.Read(payload)

			got := make(chan []byte, 1)
			go func() {
				time.Sleep(50 * time.Millisecond)
				_ = s.SetReadDeadline(time.Now().Add(20 * time.Second)) // a writer that stops early fails, not hangs
				var b bytes.Buffer
				buf := make([]byte, 1000) // small reads
				for b.Len() < len(payload) {
					n, err := s.Read(buf)
					if err != nil {
						break
					}
					b.Write(buf[:n])
				}
				got <- b.Bytes()
			}()
			n, err := rw.Write(payload)
			require.NoError(t, err)
			assert.Equal(t, len(payload), n, "Write writes all of it")
			assert.True(t, bytes.Equal(payload, <-got), "the peer read every byte in order")

			// And back: the peer writes the payload, then closes; reading ends with io.EOF.
			go func() {
				_, _ = s.Write(payload)
				_ = s.CloseWrite()
			}()
			var b bytes.Buffer
			buf := make([]byte, 64<<10)
			var rerr error
			for {
				n, err := rw.Read(buf)
				if n < 0 || n > len(buf) {
					t.Fatalf("Read answered %d", n)
				}
				b.Write(buf[:n])
				if err != nil {
					rerr = err
					break
				}
				assert.Positive(t, n, "a Read without an error reads at least one byte")
			}
			assert.Equal(t, io.EOF, rerr, "the end of the stream is io.EOF itself")
			assert.True(t, bytes.Equal(payload, b.Bytes()), "every byte read in order")

			n, err = rw.Read(nil)
			assert.Equal(t, 0, n)
			assert.NoError(t, err, "an empty read reads nothing, without an error")
		})
	}
}

// opOf answers the Op of the *net.OpError err is ("" when it is none), and "nested" when it wraps
// another (the raw connection's own "raw-read" error, say: net.Conn's errors are one level).
func opOf(err error) string {
	var oe *net.OpError
	if !errors.As(err, &oe) {
		return ""
	}
	var inner *net.OpError
	if errors.As(oe.Err, &inner) {
		return "nested"
	}
	return oe.Op
}

func TestRawSocketErrorsAreNetConns(t *testing.T) {
	for _, way := range []string{"net.Conn", "RawSocket"} {
		t.Run(way+"/deadline", func(t *testing.T) {
			c, _ := tcpPair(t)
			rw := conns(t, c)[way]
			require.NoError(t, c.SetReadDeadline(time.Now().Add(50*time.Millisecond)))
			start := time.Now()
			_, err := rw.Read(make([]byte, 10))
			assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond, "the read waited for data until the deadline")
			assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
			var ne net.Error
			require.ErrorAs(t, err, &ne)
			assert.True(t, ne.Timeout(), "a deadline is a timeout, as fasthttp tests it")
			assert.Equal(t, "read", opOf(err))

			// A deadline already past fails a write the same way, writing nothing.
			require.NoError(t, c.SetWriteDeadline(time.Now().Add(-time.Second)))
			n, err := rw.Write([]byte("late"))
			assert.Equal(t, 0, n)
			assert.ErrorIs(t, err, os.ErrDeadlineExceeded)
			assert.Equal(t, "write", opOf(err))
		})
		t.Run(way+"/data waits for the reader", func(t *testing.T) {
			c, s := tcpPair(t)
			rw := conns(t, c)[way]
			go func() {
				time.Sleep(30 * time.Millisecond)
				_, _ = s.Write([]byte("late hello"))
			}()
			buf := make([]byte, 64)
			n, err := rw.Read(buf)
			require.NoError(t, err)
			assert.Equal(t, "late hello", string(buf[:n]), "a read with nothing to read waits for the data")
		})
		t.Run(way+"/closed", func(t *testing.T) {
			c, _ := tcpPair(t)
			rw := conns(t, c)[way]
			require.NoError(t, c.Close())
			_, err := rw.Read(make([]byte, 10))
			assert.ErrorIs(t, err, net.ErrClosed)
			assert.Equal(t, "read", opOf(err))
			_, err = rw.Write([]byte("x"))
			assert.ErrorIs(t, err, net.ErrClosed)
			assert.Equal(t, "write", opOf(err))
		})
		t.Run(way+"/reset by the peer", func(t *testing.T) {
			c, s := tcpPair(t)
			rw := conns(t, c)[way]
			require.NoError(t, s.SetLinger(0)) // close with a reset
			require.NoError(t, s.Close())
			var err error
			for i := 0; i < 100 && err == nil; i++ { // the first write may go out before the reset is seen
				_, err = rw.Write([]byte("anyone there?"))
				time.Sleep(time.Millisecond)
			}
			require.Error(t, err)
			assert.Equal(t, "write", opOf(err), "aikeys' retry rule reads a failed write by its Op")
			assert.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE), "%v", err)
			_, err = rw.Read(make([]byte, 10))
			assert.Error(t, err)
		})
		t.Run(way+"/close while reading", func(t *testing.T) {
			c, _ := tcpPair(t)
			rw := conns(t, c)[way]
			done := make(chan error, 1)
			go func() {
				_, err := rw.Read(make([]byte, 10))
				done <- err
			}()
			time.Sleep(20 * time.Millisecond)
			require.NoError(t, c.Close())
			select {
			case err := <-done:
				assert.ErrorIs(t, err, net.ErrClosed, "a Close ends a read waiting for data")
			case <-time.After(5 * time.Second):
				t.Fatal("the read went on after Close")
			}
		})
	}
}

func TestRawSocketOnlyForPlainTCP(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	assert.Nil(t, httpx.NewRawSocket(a), "no raw socket for what is not a TCP connection (TLS, pipes)")
}
