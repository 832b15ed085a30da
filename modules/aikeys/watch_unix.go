//go:build unix

package aikeys

import (
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/gofiber/fiber/v2"
)

// clientCheckDelay is how long an upstream call runs before the client's connection is checked
// (a fast answer pays one timer, nothing more); clientCheckEvery is the check's period after.
var (
	clientCheckDelay = time.Second
	clientCheckEvery = 250 * time.Millisecond
)

// watchClient calls cancel when the client's connection turns out closed while the handler waits
// for the upstream. Each check is a non-blocking MSG_PEEK through the raw connection, so it never
// takes a byte from fasthttp, touches no deadline and needs no goroutine. Sockets that are not
// plain (TLS terminated here) are not watched. stop must be called before the handler returns.
func watchClient(c *fiber.Ctx, cancel func()) (stop func()) {
	sc, ok := c.Context().Conn().(syscall.Conn)
	if !ok {
		return func() {}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	mu.Lock()
	t = time.AfterFunc(clientCheckDelay, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		gone, again := false, true
		var buf [1]byte
		if rc.Control(func(fd uintptr) {
			n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR):
			case err != nil || n == 0: // reset, or end of file: the client is gone
				gone = true
			default: // a pipelined request waits: the client is there
				again = false
			}
		}) != nil {
			return // closed under us: nothing more to watch
		}
		if gone {
			cancel()
			return
		}
		if again {
			t.Reset(clientCheckEvery)
		}
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}
