package aikeys

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"provisioner/platform/httpx"
)

// idleConnTimeout is how long an upstream connection may stay idle in our pools. The common
// OpenAI-compatible servers close idle keep-alive connections after 5 s (uvicorn, behind vLLM and
// LiteLLM; Node's http server; llama.cpp's server): at 4 s our pools drop a connection before the
// server does, with a second to spare, so a request is rarely sent on a connection the server is
// closing. Below that an idle client dials more often; above it, every call after an idle gap
// would land on a closed connection. Servers with shorter timeouts are covered by upstreamTransport's retry.
const idleConnTimeout = 4 * time.Second

// staleConn is an upstream connection that counts the answers it carried, so a request that fails
// on it can be told to have met a reused connection.
type staleConn struct {
	net.Conn
	raw    *httpx.RawSocket // see httpx.RawSocket; nil: the connection's own Read and Write
	local  staleAddr
	served int // answers read whole on this connection (counted by upstreamTransport)
}

// staleAddr is the connection's local address, carrying the connection: fasthttp hands it to the
// transport, which is how upstreamTransport finds the connection a request used,
// with no per-request allocation.
type staleAddr struct {
	net.Addr
	c *staleConn
}

func (c *staleConn) LocalAddr() net.Addr { return &c.local }

func (c *staleConn) Read(p []byte) (int, error) {
	if c.raw != nil {
		return c.raw.Read(p)
	}
	return c.Conn.Read(p)
}

func (c *staleConn) Write(p []byte) (int, error) {
	if c.raw != nil {
		return c.raw.Write(p)
	}
	return c.Conn.Write(p)
}

// dialStale dials an upstream connection that counts its answers (fasthttp adds TLS on top).
func dialStale(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := fasthttp.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	c := &staleConn{Conn: conn, raw: httpx.NewRawSocket(conn)}
	c.local = staleAddr{Addr: conn.LocalAddr(), c: c}
	return c, nil
}

// upstreamTransport is fasthttp's transport for plain upstream calls, on its exported connection
// API, adding two things: a call whose client left is abandoned (its connection is closed, so the
// upstream stops generating and nothing is charged), and a request that failed on a reused
// connection before any answer byte is retried once on a fresh one (the server had closed the idle
// connection). A call's deadline is Ai:TimeoutSeconds for writing and reading together.
type upstreamTransport struct{ calls *sync.Map } // *fasthttp.Request -> *call

func (t upstreamTransport) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, res *fasthttp.Response) (bool, error) {
	var cl *call
	if v, ok := t.calls.Load(req); ok {
		cl = v.(*call)
	}
	sc, err := roundTrip(hc, req, res, cl)
	if err == nil {
		if sc != nil {
			sc.served++
		}
		return false, nil
	}
	// fasthttp reports "not one answer byte" as io.EOF (a reset included); a failed write
	// means nothing came back either.
	var oe *net.OpError
	if sc == nil || sc.served == 0 || (err != io.EOF && !(errors.As(err, &oe) && oe.Op == "write")) {
		return false, err
	}
	// The server closed this idle connection, so it closed the ones idle longer too: with the
	// LIFO pool every other idle connection is older. Drop them so the retry dials afresh.
	hc.CloseIdleConnections()
	return true, err
}

// roundTrip sends req on a pooled connection and reads the whole answer into res. It answers the
// connection's staleConn (nil when it is not one) for the retry rule.
func roundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, res *fasthttp.Response, cl *call) (*staleConn, error) {
	deadline := time.Now().Add(hc.ReadTimeout)
	cc, err := hc.AcquireConn(hc.ReadTimeout, req.ConnectionClose())
	if err != nil {
		return nil, err
	}
	conn := cc.Conn()
	res.ParseNetConn(conn)
	var sc *staleConn
	if a, ok := conn.LocalAddr().(*staleAddr); ok {
		sc = a.c
	}
	// abandon closes the plain TCP connection under TLS, if any: closing a tls.Conn first
	// writes close_notify, which would wait behind a request write the upstream does not read.
	var raw net.Conn = conn
	if sc != nil {
		raw = sc
	}
	if cl != nil && !cl.attach(raw) {
		hc.CloseConn(cc)
		return nil, errClientGone // not retried: sc is not handed back
	}
	fail := func(err error) (*staleConn, error) {
		hc.CloseConn(cc)
		if cl != nil && !cl.detach() {
			return nil, errClientGone
		}
		if x, ok := err.(interface{ Timeout() bool }); ok && x.Timeout() {
			err = fasthttp.ErrTimeout
		}
		return sc, err
	}
	if hc.ReadTimeout > 0 {
		if err := conn.SetDeadline(deadline); err != nil {
			return fail(err)
		}
	}
	bw := hc.AcquireWriter(conn)
	err = req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	hc.ReleaseWriter(bw)
	if err != nil {
		return fail(err)
	}
	br := hc.AcquireReader(conn)
	err = res.ReadLimitBody(br, hc.MaxResponseBodySize)
	hc.ReleaseReader(br)
	if err != nil {
		return fail(err)
	}
	// An answer read whole is the answer, even if the client left meanwhile (it is charged: the
	// upstream generated it); the connection is not pooled if it was closed under it.
	if (cl != nil && !cl.detach()) || req.ConnectionClose() || res.ConnectionClose() {
		hc.CloseConn(cc)
	} else {
		hc.ReleaseConn(cc)
	}
	return sc, nil
}

// errClientGone means the client of a call left, so the call was abandoned.
var errClientGone = errors.New("the client left")

// call is one plain upstream request, abandoned when its client leaves.
type call struct {
	mu   sync.Mutex
	conn net.Conn // the connection the request is on, while it is
	gone bool     // the client left
}

// abandon closes the connection the request is on (or will get): the client left.
func (c *call) abandon() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone = true
	if c.conn != nil {
		_ = c.conn.Close()
	}
}

// attach records the connection the request goes on; false when the client already left.
func (c *call) attach(conn net.Conn) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn = conn
	return !c.gone
}

// detach forgets the connection, so it can be pooled; false when abandon closed it.
func (c *call) detach() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conn = nil
	return !c.gone
}
