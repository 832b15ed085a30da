package aikeys

import (
	"errors"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// idleConnTimeout is how long an upstream connection may stay idle in our pools. The common
// OpenAI-compatible servers close idle keep-alive connections after 5 s (uvicorn, behind vLLM and
// LiteLLM; Node's http server; llama.cpp's server): at 4 s our pools drop a connection before the
// server does, with a second to spare, so a request is rarely sent on a connection the server is
// closing. Below that an idle client dials more often; above it, every call after an idle gap
// would land on a closed connection. Servers with shorter timeouts are covered by retryStale.
const idleConnTimeout = 4 * time.Second

// staleConn is an upstream connection that counts the answers it carried, so a request that fails
// on it can be told to have met a reused connection.
type staleConn struct {
	net.Conn
	local  staleAddr
	served int // answers read whole on this connection (counted by retryStale)
}

// staleAddr is the connection's local address, carrying the connection: fasthttp hands it to the
// transport (Response.LocalAddr), which is how retryStale finds the connection a request used,
// with no per-request allocation.
type staleAddr struct {
	net.Addr
	c *staleConn
}

func (c *staleConn) LocalAddr() net.Addr { return &c.local }

// dialStale dials an upstream connection that counts its answers (fasthttp adds TLS on top).
func dialStale(addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := fasthttp.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	c := &staleConn{Conn: conn}
	c.local = staleAddr{Addr: conn.LocalAddr(), c: c}
	return c, nil
}

// retryStale is fasthttp's transport, telling the client to retry (once: see NewUpstream) a
// request that failed on a reused connection before any answer byte came back: the server had
// closed that idle connection, so it never saw the request or dropped it unread, and sending it
// again on a fresh connection is safe. fasthttp never retries a POST by itself. A failure on a
// fresh connection, a timeout, or an answer cut after its first byte is not retried (the upstream
// may have generated it).
type retryStale struct{}

func (retryStale) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, res *fasthttp.Response) (bool, error) {
	_, err := fasthttp.DefaultTransport.RoundTrip(hc, req, res)
	a, ok := res.LocalAddr().(*staleAddr)
	if err == nil {
		if ok {
			a.c.served++
		}
		return false, nil
	}
	// fasthttp reports "not one answer byte" as io.EOF (a reset included); a failed write
	// means nothing came back either.
	var oe *net.OpError
	if !ok || a.c.served == 0 || (err != io.EOF && !(errors.As(err, &oe) && oe.Op == "write")) {
		return false, err
	}
	// The server closed this idle connection, so it closed the ones idle longer too: with the
	// LIFO pool every other idle connection is older. Drop them so the retry dials afresh.
	hc.CloseIdleConnections()
	return true, err
}
