package testutil

import (
	"io"
	"net"
	"sync"
	"testing"
)

// TCPProxy forwards local connections to a real service and can be cut (every connection reset,
// new ones refused) and restored: a dependency outage without touching the shared service.
type TCPProxy struct {
	Addr   string
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	up     bool
}

// StartProxy forwards 127.0.0.1:<free port> to target until the test ends.
func StartProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{Addr: ln.Addr().String(), ln: ln, target: target, up: true}
	t.Cleanup(func() { ln.Close(); p.Cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if !p.up {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

// Cut resets every open connection and refuses new ones until Restore.
func (p *TCPProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// Restore accepts connections again.
func (p *TCPProxy) Restore() { p.mu.Lock(); p.up = true; p.mu.Unlock() }
