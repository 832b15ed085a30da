//go:build linux

package httpx_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/httpx"
)

// TestSlowReadersAreBoundedAndCutOff: 300 connections from one address ask for a large answer
// and never read it. The first 256 (MaxConnsPerIP) are served, the rest reset as they are
// accepted (no goroutine, no buffer); the process's memory stays bounded; another address is
// served meanwhile; and once the write timeout passes with nothing taken, every connection is
// reset, its answer cut.
func TestSlowReadersAreBoundedAndCutOff(t *testing.T) {
	const perIP, clients = 256, 300
	body := bytes.Repeat([]byte("x"), 16<<20) // one answer, shared by every request (never copied)
	s, err := httpx.NewServer(httpx.ServerOptions{Title: "t", Version: "1", WriteTimeout: time.Second, MaxConnsPerIP: perIP,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	var served atomic.Int32
	s.App.Get("/big", func(c *fiber.Ctx) error { served.Add(1); return c.Send(body) })
	s.App.Get("/small", func(c *fiber.Ctx) error { return c.SendString("small") })
	s.Finish()
	require.NoError(t, s.Listen("127.0.0.1:0"))
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()

	// From 127.0.0.2, with a small receive window: the server's sends stall almost at once.
	slow := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conns := make([]net.Conn, clients)
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	})
	var wg sync.WaitGroup
	var dialRefused atomic.Int32
	for i := range conns {
		wg.Go(func() {
			c, err := slow.Dial("tcp", s.Addr())
			if errors.Is(err, syscall.ECONNRESET) {
				dialRefused.Add(1) // reset by the server before the dial returned
				return
			}
			assert.NoError(t, err)
			conns[i] = c
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return httpx.OpenConns(s) == perIP }, 30*time.Second, 10*time.Millisecond,
		"the server holds %d connections of one client, %d", perIP, clients)
	// The dialling goroutines may not have ended yet: one kept per refused connection never ends.
	assert.Eventually(t, func() bool { return runtime.NumGoroutine()-goroutines <= perIP+8 }, 10*time.Second, 10*time.Millisecond,
		"no goroutine per refused connection")

	// Every connection asks for the large answer, and reads none of it.
	for _, c := range conns {
		if c != nil {
			_, _ = c.Write([]byte("GET /big HTTP/1.1\r\nHost: t\r\n\r\n")) // a refused one is reset already
		}
	}
	require.Eventually(t, func() bool { return served.Load() == perIP }, 30*time.Second, 10*time.Millisecond,
		"every held connection's request is answered")
	time.Sleep(200 * time.Millisecond) // the first writes fill the sockets' buffers
	runtime.GC()
	var held runtime.MemStats
	runtime.ReadMemStats(&held)
	grown := int64(held.HeapInuse) - int64(before.HeapInuse)
	t.Logf("heap grew by %d KiB", grown>>10)
	assert.Less(t, grown, int64(perIP*64<<10), "heap grew by %d MiB for %d held connections", grown>>20, perIP)

	// Meanwhile another address is served.
	other := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := other.Get("http://" + s.Addr() + "/small")
	require.NoError(t, err)
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Equal(t, "small", string(raw))

	// Nothing is taken: the write timeout resets every held connection.
	require.Eventually(t, func() bool { return httpx.OpenConns(s) == 0 }, 30*time.Second, 50*time.Millisecond,
		"%d connections still open after the write timeout", httpx.OpenConns(s))
	refused, cut := int(dialRefused.Load()), 0
	for _, c := range conns {
		if c == nil {
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := io.Copy(io.Discard, c)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server ended every connection")
		switch {
		case n == 0:
			refused++
		case n < int64(len(body)):
			cut++
		}
	}
	assert.Equal(t, clients-perIP, refused, "refused as accepted")
	assert.Equal(t, perIP, cut, "answers cut by the write timeout")
}
