package httpx_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/httpx"
	"provisioner/platform/testutil"
)

// TestBodyOverLimitSentWhole: a client that sends its whole body before reading the answer (fetch,
// the OpenAI SDKs, Go's http.Client; none sends Expect: 100-continue) gets the 413 envelope. The
// server answered after the headers and closed with the body unread, so Linux reset the upload and
// the client lost the answer.
func TestBodyOverLimitSentWhole(t *testing.T) {
	base := newServer(t)
	for _, size := range []int{3 << 20, 8 << 20, 32 << 20} {
		t.Run(fmt.Sprintf("%d MiB", size>>20), func(t *testing.T) {
			res, raw := testutil.Upload(t, base, "POST", "/api/widgets", map[string]string{"Content-Type": "application/json"}, size)
			assert.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, raw)
			assert.Contains(t, raw, `"success":false`)
			assert.Contains(t, raw, "1 MiB")
			assert.NotEmpty(t, res.Header.Get("X-Request-Id"))
		})
	}
	t.Run("http.Client", func(t *testing.T) {
		for range 3 {
			res, err := http.Post(base+"/api/widgets", "application/json", bytes.NewReader(make([]byte, 8<<20)))
			require.NoError(t, err, "the answer is lost")
			raw, _ := io.ReadAll(res.Body)
			res.Body.Close()
			assert.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode, string(raw))
		}
	})
}

// TestLingeringIsBounded: after its 413 a client that keeps sending is cut off once the server has
// discarded the most it reads, lingered the longest it lingers, or heard nothing for the idle
// bound; and past the cap on lingering connections a connection is closed at once.
func TestLingeringIsBounded(t *testing.T) {
	const unbounded = 1 << 40
	cases := []struct {
		name          string
		total, idle   time.Duration
		maxBytes      int64
		maxConns      int
		pause, every  time.Duration // silence after the 413, then one write each every
		least, within time.Duration // the connection ends no sooner and no later
	}{
		{"bytes", 20 * time.Second, 20 * time.Second, 4 << 20, 8, 0, 0, 0, 5 * time.Second},
		{"time", time.Second, 20 * time.Second, unbounded, 8, 0, 10 * time.Millisecond, 700 * time.Millisecond, 5 * time.Second},
		{"idle", 20 * time.Second, 300 * time.Millisecond, unbounded, 8, time.Second, 10 * time.Millisecond, 0, 3 * time.Second},
		{"connections", 20 * time.Second, 20 * time.Second, unbounded, 1, 0, 0, 0, 5 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := buildServer(t, httpx.ServerOptions{})
			httpx.SetLinger(s, tc.total, tc.idle, tc.maxBytes, tc.maxConns)
			require.NoError(t, s.Listen("127.0.0.1:0"))
			t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
			if tc.maxConns == 1 { // one connection lingers (silent), so the next one cannot
				defer overLimit(t, s.Addr()).Close()
				// The server starts lingering when it closes, just after the client read its 413.
				require.Eventually(t, func() bool { return httpx.Lingering(s) == 1 }, 5*time.Second, 5*time.Millisecond)
			}
			conn := overLimit(t, s.Addr())
			defer conn.Close()
			time.Sleep(tc.pause)
			sent, took, err := sendUntilClosed(conn, tc.every)
			require.Error(t, err, "the server still reads after %s", took)
			assert.GreaterOrEqual(t, took, tc.least)
			assert.Less(t, took, tc.within)
			if tc.name == "bytes" {
				assert.GreaterOrEqual(t, sent, tc.maxBytes, "the server read what it may")
			}
		})
	}
}

// TestShutdownEndsLingering: a lingering connection does not hold Shutdown past its deadline, and
// nothing is left running afterwards.
func TestShutdownEndsLingering(t *testing.T) {
	s := buildServer(t, httpx.ServerOptions{})
	httpx.SetLinger(s, time.Minute, time.Minute, httpx.LingerMaxBytes, httpx.LingerMaxConns)
	require.NoError(t, s.Listen("127.0.0.1:0"))
	client := &http.Client{Transport: &http.Transport{}}
	for range 20 {
		res, err := client.Get("http://" + s.Addr() + "/api/widgets/1")
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	lingering := overLimit(t, s.Addr())
	defer lingering.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.NoError(t, s.Shutdown(ctx))
	assert.Less(t, time.Since(start), 2*time.Second)
	_, _, err := sendUntilClosed(lingering, 10*time.Millisecond)
	require.Error(t, err, "the lingering connection is closed")
	client.CloseIdleConnections()
	lingering.Close()
	assert.Eventually(t, func() bool { return httpxGoroutines() == "" }, 5*time.Second, 20*time.Millisecond,
		"still running: %s", httpxGoroutines())
}

// TestShutdownClosesIdleKeepAliveAtOnce: an idle keep-alive connection whose client stays silent
// is closed at once on Shutdown, not lingered on (it was not answered just now).
func TestShutdownClosesIdleKeepAliveAtOnce(t *testing.T) {
	s := buildServer(t, httpx.ServerOptions{})
	httpx.SetLinger(s, time.Minute, time.Minute, httpx.LingerMaxBytes, httpx.LingerMaxConns)
	require.NoError(t, s.Listen("127.0.0.1:0"))
	conn, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer conn.Close()
	_, err = io.WriteString(conn, "GET /api/widgets/1 HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, res.Body)
	require.Equal(t, http.StatusOK, res.StatusCode)
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	require.NoError(t, s.Shutdown(ctx))
	assert.Less(t, time.Since(start), time.Second)
}

// overLimit opens a connection, announces a body over the limit, sends its first bytes and reads
// the 413: the connection then lingers.
func overLimit(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "POST /api/widgets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 1<<30)
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	return conn
}

// sendUntilClosed writes 32 KiB (every > 0: one write each every) until a write fails or 15 s
// pass; it returns the bytes sent, the time taken and the error.
func sendUntilClosed(conn net.Conn, every time.Duration) (int64, time.Duration, error) {
	chunk := make([]byte, 32<<10)
	start := time.Now()
	var sent int64
	for time.Since(start) < 15*time.Second {
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		n, err := conn.Write(chunk)
		sent += int64(n)
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return sent, time.Since(start), err
		}
		time.Sleep(every)
	}
	return sent, time.Since(start), nil
}

// httpxGoroutines lists the goroutines running in package httpx (fasthttp's own stop in their time).
func httpxGoroutines() string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "provisioner/platform/httpx.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}
