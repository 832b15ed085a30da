package testutil

import (
	"net"
	"sync"
	"testing"
)

// TCPProxy forwards local connections to a real service and can be cut (every connection reset,
// new ones refused) and restored, or stalled (connections stay open, nothing gets through): a
// dependency outage or a hung host without touching the shared service.
type TCPProxy struct {
	Addr   string
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	up     bool
	flow   chan struct{} // closed while bytes flow; open while stalled
}

// StartProxy forwards 127.0.0.1:<free port> to target until the test ends.
func StartProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{Addr: ln.Addr().String(), ln: ln, target: target, up: true, flow: make(chan struct{})}
	close(p.flow)
	t.Cleanup(func() { ln.Close(); p.Cut(); p.Flow() })
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
			go p.pipe(u, c)
			go p.pipe(c, u)
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

// pipe copies src to dst, holding each chunk while the proxy is stalled.
func (p *TCPProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			flow := p.flow
			p.mu.Unlock()
			<-flow
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Stall keeps every connection open but lets nothing through until Flow: a host that hangs.
func (p *TCPProxy) Stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flow:
		p.flow = make(chan struct{})
	default:
	}
}

// Flow lets bytes through again after Stall.
func (p *TCPProxy) Flow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flow:
	default:
		close(p.flow)
	}
}

// Restore accepts connections again.
func (p *TCPProxy) Restore() { p.mu.Lock(); p.up = true; p.mu.Unlock() }
