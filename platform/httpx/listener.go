package httpx

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"provisioner/platform/ratelimit"
)

// Lingering close (nginx's lingering_close): a connection the server closes while the client may
// still be sending (a body over BodyLimit is answered 413 as soon as its Content-Length is read)
// is not closed at once. Closing a socket with unread data makes Linux answer with a reset, and a
// client still uploading (fetch, the OpenAI SDKs, Go's http.Client: none sends
// Expect: 100-continue) then loses the answer already on its way. Instead the server sends FIN
// after the answer, reads and discards what the client still sends within these bounds, then
// closes.
const (
	// LingerTime is the longest a connection lingers.
	LingerTime = 30 * time.Second
	// LingerTimeout ends the lingering once the client has sent nothing for this long.
	LingerTimeout = 5 * time.Second
	// LingerMaxBytes is the most the server reads and discards from one lingering connection.
	LingerMaxBytes = 64 << 20
	// LingerMaxConns is the most connections lingering at once; past it, a connection is closed
	// at once.
	LingerMaxConns = 1024
)

type lingerBounds struct {
	time, timeout time.Duration
	maxBytes      int64
	maxConns      int
}

var defaultLinger = lingerBounds{time: LingerTime, timeout: LingerTimeout, maxBytes: LingerMaxBytes, maxConns: LingerMaxConns}

// connLimits bound what one client holds: how many connections (MaxConnectionsPerIp), and how
// long one write to it may wait (WriteTimeout).
type connLimits struct {
	// perIP is the most connections open at once from one address (an IPv6 one's prefix of
	// ipv6Prefix bits); 0 is no limit. Addresses in exempt (trusted proxies) have none.
	perIP      int
	ipv6Prefix int
	exempt     []netip.Prefix
	// writeTimeout bounds each write of at most writeChunk bytes; 0 is none.
	writeTimeout time.Duration
}

// writeChunk is the most one write under one write deadline sends: a client must take each
// writeChunk bytes within WriteTimeout, so a large answer is not cut while the client reads it.
const writeChunk = 64 << 10

// serverListener tracks the open connections, so Shutdown can close the ones a client opened but
// never used (fasthttp's graceful shutdown waits for those until they time out), and closes the
// server's connections with a lingering close. It refuses a client's connection past
// connLimits.perIP as it accepts it: closed at once, with a reset, before any goroutine or buffer
// is spent on it.
type serverListener struct {
	net.Listener
	bounds lingerBounds
	limits connLimits

	mu        sync.Mutex
	open      map[*serverConn]struct{}
	perIP     map[netip.Prefix]int // open connections by client (connKey)
	lingering map[*serverConn]struct{}
	stopped   bool // no new lingering: Shutdown is closing the lingering ones
	drains    sync.WaitGroup
}

func newServerListener(ln net.Listener, b lingerBounds) *serverListener {
	return &serverListener{Listener: ln, bounds: b, open: map[*serverConn]struct{}{}, perIP: map[netip.Prefix]int{},
		lingering: map[*serverConn]struct{}{}}
}

type serverConn struct {
	net.Conn
	raw     *RawSocket // Read and Write without the scheduler's system-call bookkeeping, when not nil
	l       *serverListener
	key     netip.Prefix // the client counted in l.perIP; invalid when not counted
	reading atomic.Int32 // Reads in progress
	eof     atomic.Bool  // the client closed its side: it sends nothing more
	stuck   atomic.Bool  // a write failed (the client took nothing within WriteTimeout, or left)
	closed  atomic.Bool
}

func (l *serverListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := l.connKey(c)
		l.mu.Lock()
		if key.IsValid() && l.perIP[key] >= l.limits.perIP {
			l.mu.Unlock()
			abort(c)
			continue
		}
		sc := &serverConn{Conn: c, l: l, key: key}
		l.open[sc] = struct{}{}
		if key.IsValid() {
			l.perIP[key]++
		}
		l.mu.Unlock()
		sc.raw = NewRawSocket(c)
		return sc, nil
	}
}

// connKey is the client c counts as under connLimits.perIP: its address, or an IPv6 address's
// prefix; invalid (not counted) without a limit, for an exempt address, or when c has no IP.
func (l *serverListener) connKey(c net.Conn) netip.Prefix {
	if l.limits.perIP <= 0 {
		return netip.Prefix{}
	}
	ta, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Prefix{}
	}
	a, ok := netip.AddrFromSlice(ta.IP)
	if !ok {
		return netip.Prefix{}
	}
	a = a.Unmap()
	if inPrefixes(a, l.limits.exempt) {
		return netip.Prefix{}
	}
	return ratelimit.ClientPrefix(a, l.limits.ipv6Prefix)
}

// abort closes c with a reset: the kernel drops whatever is queued at once.
func abort(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// SyscallConn exposes the socket for a look that reads nothing (the AI gateway peeks whether a
// client that waits for a slow upstream has left); an error when it is no plain socket.
func (c *serverConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func (c *serverConn) Read(p []byte) (int, error) {
	c.reading.Add(1)
	var n int
	var err error
	if c.raw != nil {
		n, err = c.raw.Read(p)
	} else {
		n, err = c.Conn.Read(p)
	}
	c.reading.Add(-1)
	if err == io.EOF {
		c.eof.Store(true)
	}
	return n, err
}

// Write writes p; under a WriteTimeout, each writeChunk bytes must be taken within it.
func (c *serverConn) Write(p []byte) (int, error) {
	d := c.l.limits.writeTimeout
	if d <= 0 {
		return c.write(p)
	}
	written := 0
	for written < len(p) {
		end := min(len(p), written+writeChunk)
		if err := c.Conn.SetWriteDeadline(time.Now().Add(d)); err != nil {
			c.stuck.Store(true)
			return written, err
		}
		n, err := c.write(p[written:end])
		written += n
		if err != nil {
			c.stuck.Store(true)
			return written, err
		}
	}
	return written, nil
}

func (c *serverConn) write(p []byte) (int, error) {
	if c.raw != nil {
		return c.raw.Write(p)
	}
	return c.Conn.Write(p)
}

// Close lingers when the connection's own goroutine closes it (it answered and is done) and the
// client has not closed its side. A Close while a Read is blocked comes from elsewhere (fasthttp
// closing idle keep-alive connections on shutdown): nothing is in flight then, so it closes at once.
// A connection whose write failed is reset: its client takes nothing, so what is queued is dropped.
func (c *serverConn) Close() error {
	if !c.claim() {
		return nil
	}
	if c.stuck.Load() {
		abort(c.Conn)
		return nil
	}
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok || c.reading.Load() > 0 || c.eof.Load() || !c.l.startLingering(c) {
		return c.Conn.Close()
	}
	if err := cw.CloseWrite(); err != nil { // the client is gone already
		c.l.doneLingering(c)
		return c.Conn.Close()
	}
	go c.drain()
	return nil
}

// claim marks c closed and forgets it; only the first caller gets true.
func (c *serverConn) claim() bool {
	if !c.closed.CompareAndSwap(false, true) {
		return false
	}
	c.l.mu.Lock()
	delete(c.l.open, c)
	if c.key.IsValid() {
		if n := c.l.perIP[c.key] - 1; n > 0 {
			c.l.perIP[c.key] = n
		} else {
			delete(c.l.perIP, c.key)
		}
	}
	c.l.mu.Unlock()
	return true
}

// startLingering counts c among the lingering connections, unless Shutdown is stopping them or
// there are LingerMaxConns already.
func (l *serverListener) startLingering(c *serverConn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || len(l.lingering) >= l.bounds.maxConns {
		return false
	}
	l.lingering[c] = struct{}{}
	l.drains.Add(1)
	return true
}

// drain reads and discards what the client still sends, within the bounds, then closes.
func (c *serverConn) drain() {
	defer c.l.doneLingering(c)
	r := &deadlineReader{conn: c.Conn, end: time.Now().Add(c.l.bounds.time), idle: c.l.bounds.timeout}
	_, _ = io.CopyN(io.Discard, r, c.l.bounds.maxBytes)
	_ = c.Conn.Close()
}

func (l *serverListener) doneLingering(c *serverConn) {
	l.mu.Lock()
	delete(l.lingering, c)
	l.mu.Unlock()
	l.drains.Done()
}

// deadlineReader reads until end, and fails once a read waits longer than idle.
type deadlineReader struct {
	conn net.Conn
	end  time.Time
	idle time.Duration
}

func (r *deadlineReader) Read(p []byte) (int, error) {
	d := time.Now().Add(r.idle)
	if d.After(r.end) {
		d = r.end
	}
	if err := r.conn.SetReadDeadline(d); err != nil {
		return 0, err
	}
	return r.conn.Read(p)
}

// closeAll closes every open connection at once, without lingering (Shutdown past its deadline).
func (l *serverListener) closeAll() {
	l.mu.Lock()
	conns := make([]*serverConn, 0, len(l.open))
	for c := range l.open {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		if c.claim() {
			_ = c.Conn.Close()
		}
	}
}

// stopLingering lets the lingering connections finish until ctx ends, then closes the rest, and
// returns once every drain has ended. Connections closed afterwards close at once.
func (l *serverListener) stopLingering(ctx context.Context) {
	l.mu.Lock()
	l.stopped = true
	l.mu.Unlock()
	done := make(chan struct{})
	go func() {
		l.drains.Wait()
		close(done)
	}()
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	l.mu.Lock()
	for c := range l.lingering {
		_ = c.Conn.Close()
	}
	l.mu.Unlock()
	<-done
}
