// Package coherent keeps in-process caches of control-database rows coherent across replicas, so
// the hot path (the principal of a token, an AI key, a user's own list) costs no network round trip
// while a change still takes effect on the next request whichever replica serves it. A trigger
// NOTIFYs every changed row's key at commit and each replica's Bus drops those entries; a replica
// serves from its caches only while its own heartbeat comes back within Options.Window / 2
// (Fresh); Sync, called before answering any request that wrote, returns once every replica
// acknowledged everything committed before it. A cache hit is a map lookup; a write request waits
// about 1 ms. The full design: docs/architecture.md, "Coherent caches".
package coherent

import (
	"context"
	"crypto/rand"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
)

// Channel is the NOTIFY channel of the change feed; the trigger function coherent_notify uses it.
const Channel = "coherent"

// Defaults of Options.
const (
	DefaultHeartbeat = 100 * time.Millisecond
	DefaultWindow    = time.Second
)

// ErrNotStarted is returned by Sync before Start or after Stop.
var ErrNotStarted = errors.New("coherent: bus is not running")

// Options configures New.
type Options struct {
	// Heartbeat is how often this replica proves its listener is current; default 100 ms.
	Heartbeat time.Duration
	// Window bounds how long a Sync waits for a replica that does not acknowledge; caches are
	// trusted for Window/2 after the last proof. Default 1 s.
	Window time.Duration
	// Logger receives listener losses and recoveries; default slog.Default().
	Logger *slog.Logger
	// Lag delays the application of every notification (fault injection: a replica whose
	// listener falls behind); zero in production.
	Lag time.Duration
}

// Bus is this replica's end of the change feed. Safe for concurrent use.
type Bus struct {
	db   *bun.DB
	o    Options
	node string
	base time.Time

	running   atomic.Bool
	confirmed atomic.Int64 // mono: send time of the newest own heartbeat received back; 0: none
	listening atomic.Int64 // mono: when the current listener started listening; 0: not listening

	mu      sync.Mutex
	members map[string]int64 // node → mono time last heard from
	sent    map[uint64]int64 // own heartbeat seq → mono send time
	waits   map[string]*wait
	tables  map[string][]func(tags []string) // nil tags: everything of the table
	resets  []func()
	caches  []stats
	seq     uint64

	out  chan string
	ln   atomic.Pointer[context.CancelFunc] // ends the current listening connection's wait
	stop chan struct{}
	wg   sync.WaitGroup
}

// delayed is a notification held back by Options.Lag.
type delayed struct {
	payload string
	at      time.Time
}

type wait struct {
	echoed bool
	need   map[string]bool
	acked  map[string]bool
	done   chan struct{}
}

// New builds the bus; Start connects it.
func New(db *bun.DB, o Options) *Bus {
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	return &Bus{db: db, o: o, node: hex.EncodeToString(id[:]), base: time.Now(),
		members: map[string]int64{}, sent: map[uint64]int64{}, waits: map[string]*wait{},
		tables: map[string][]func([]string){}, out: make(chan string, 1024)}
}

// Node is this replica's id on the feed.
func (b *Bus) Node() string { return b.node }

func (b *Bus) mono() int64 { return int64(time.Since(b.base)) }

// Start begins listening and heartbeating; it returns at once (the caches are bypassed until the
// first heartbeat comes back, a few milliseconds later).
func (b *Bus) Start() {
	if b == nil || b.running.Swap(true) {
		return
	}
	b.stop = make(chan struct{})
	b.wg.Add(2)
	go b.listen()
	go b.beat()
}

// Stop tells the other replicas this one is leaving (so their Syncs stop waiting for it), stops
// trusting the caches and ends the goroutines.
func (b *Bus) Stop(ctx context.Context) error {
	if b == nil || !b.running.Swap(false) {
		return nil
	}
	b.confirmed.Store(0)
	close(b.stop)
	if ln := b.ln.Load(); ln != nil {
		(*ln)()
	}
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	// Only now, once no heartbeat of ours can still commit after it (one would make the others
	// count this replica again and wait for it), say that this replica is leaving.
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, _ = b.db.ExecContext(qctx, "SELECT pg_notify(?, ?)", Channel, "q "+b.node)
	return nil
}

// Fresh reports whether this replica may serve from its caches now: it is listening and has
// received its own heartbeat back within Window/2.
func (b *Bus) Fresh() bool {
	if b == nil || !b.running.Load() || b.listening.Load() == 0 {
		return false
	}
	c := b.confirmed.Load()
	return c != 0 && b.mono()-c < int64(b.o.Window/2)
}

// subscribe registers a cache: the invalidation of its entries on a change to any of its tables (nil tags: all of them),
// the reset that empties it when the listener was lost, and its statistics.
func (b *Bus) subscribe(tables []string, inval func(tags []string), reset func(), s stats) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, table := range tables {
		b.tables[table] = append(b.tables[table], inval)
	}
	b.resets = append(b.resets, reset)
	b.caches = append(b.caches, s)
}

// Sync returns once every change committed before the call has been applied by every replica that
// may be serving from its caches: those that acknowledged, and the others because they stopped
// trusting their caches (at most Window). It fails only when the token cannot be sent.
func (b *Bus) Sync(ctx context.Context) error {
	if b == nil || !b.running.Load() {
		return ErrNotStarted
	}
	var t [8]byte
	_, _ = rand.Read(t[:])
	tok := hex.EncodeToString(t[:])
	w := &wait{need: map[string]bool{}, acked: map[string]bool{}, done: make(chan struct{})}
	b.mu.Lock()
	b.waits[tok] = w
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.waits, tok)
		b.mu.Unlock()
	}()
	if _, err := b.db.ExecContext(ctx, "SELECT pg_notify(?, ?)", Channel, "s "+b.node+" "+tok); err != nil {
		return err
	}
	// Every replica whose last proof was sent before the token committed stops trusting its
	// caches Window/2 after that proof: waiting Window is enough with room for a pause.
	timer := time.NewTimer(b.o.Window)
	defer timer.Stop()
	select {
	case <-w.done:
	case <-timer.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// listen keeps one listening connection and applies what arrives on it, reconnecting with a
// backoff; each new connection empties the caches once it is listening (changes committed while
// no connection listened are not delivered).
func (b *Bus) listen() {
	defer b.wg.Done()
	backoff := 50 * time.Millisecond
	lostLogged := false
	for {
		select {
		case <-b.stop:
			return
		default:
		}
		listened := false
		err := b.listenOnce(func() bool {
			select { // Stop may have run since the check above
			case <-b.stop:
				return false
			default:
			}
			listened = true
			b.resetAll()
			b.listening.Store(b.mono())
			if lostLogged {
				b.o.Logger.Info("caches in use again: listening for changes on the control database")
				lostLogged = false
			}
			backoff = 50 * time.Millisecond
			return true
		})
		b.listening.Store(0)
		b.confirmed.Store(0)
		select {
		case <-b.stop:
			return
		default:
		}
		if listened {
			b.o.Logger.Warn("caches bypassed: the change listener lost its connection; reconnecting")
			lostLogged = true
			continue
		}
		if !lostLogged {
			b.o.Logger.Warn("caches bypassed: cannot listen for changes on the control database", "error", err.Error())
			lostLogged = true
		}
		select {
		case <-b.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// errListenEnded discards the listening connection: it is never handed back to the pool, where it
// would go on receiving the feed.
var errListenEnded = fmt.Errorf("coherent: listening ended: %w", driver.ErrBadConn)

// listenOnce takes a connection from the pool, LISTENs on it, calls listening (false: stop at
// once) and applies notifications until the connection fails or b.ln is called. It returns why it
// could not listen, or errListenEnded.
func (b *Bus) listenOnce(listening func() bool) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ln.Store(&cancel)
	defer b.ln.Store(nil)
	actx, acancel := context.WithTimeout(ctx, 5*time.Second)
	conn, err := b.db.Conn(actx)
	acancel()
	if err != nil {
		return err
	}
	defer conn.Close()
	var why error
	_ = conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			why = fmt.Errorf("coherent: the control database's driver is %T, not pgx", dc)
			return errListenEnded
		}
		pc := sc.Conn()
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := pc.Exec(lctx, "LISTEN "+Channel)
		lcancel()
		if err != nil {
			why = err
			return errListenEnded
		}
		why = errListenEnded
		if !listening() {
			return errListenEnded
		}
		var lagged chan delayed
		if b.o.Lag > 0 {
			lagged = make(chan delayed, 4096)
			defer close(lagged)
			go func() {
				for d := range lagged {
					time.Sleep(time.Until(d.at))
					b.handle(d.payload)
				}
			}()
		}
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				return errListenEnded
			}
			if lagged != nil {
				lagged <- delayed{payload: n.Payload, at: time.Now().Add(b.o.Lag)}
				continue
			}
			b.handle(n.Payload)
		}
	})
	return why
}

func (b *Bus) resetAll() {
	b.mu.Lock()
	resets := append([]func(){}, b.resets...)
	b.mu.Unlock()
	for _, r := range resets {
		r()
	}
}

// beat sends the heartbeats and the acknowledgements, on a connection of its own so a busy pool
// cannot delay them, and restarts a listener that stopped delivering.
func (b *Bus) beat() {
	defer b.wg.Done()
	t := time.NewTicker(b.o.Heartbeat)
	defer t.Stop()
	var conn *bun.Conn
	send := func(payload string) {
		ctx, cancel := context.WithTimeout(context.Background(), b.o.Window)
		defer cancel()
		if conn == nil {
			c, err := b.db.Conn(ctx)
			if err != nil {
				return
			}
			conn = &c
		}
		if _, err := conn.ExecContext(ctx, "SELECT pg_notify(?, ?)", Channel, payload); err != nil {
			_ = conn.Close()
			conn = nil
		}
	}
	defer func() {
		if conn != nil {
			_ = conn.Close()
		}
	}()
	for {
		select {
		case <-b.stop:
			return
		case p := <-b.out:
			send(p)
		case <-t.C:
			b.mu.Lock()
			b.seq++
			seq := b.seq
			b.sent[seq] = b.mono()
			delete(b.sent, seq-64)
			if seq%64 == 0 { // forget replicas not heard from for long (restarted, scaled down)
				for m, heard := range b.members {
					if b.mono()-heard > int64(10*b.o.Window) {
						delete(b.members, m)
					}
				}
			}
			b.mu.Unlock()
			send("h " + b.node + " " + strconv.FormatUint(seq, 10))
			// A listener whose connection hangs silently delivers nothing; start a new one.
			if since := b.listening.Load(); since != 0 {
				last := max(b.confirmed.Load(), since)
				if b.mono()-last > int64(3*b.o.Window) {
					if ln := b.ln.Load(); ln != nil {
						(*ln)()
					}
				}
			}
		}
	}
}

// handle applies one notification: "i table key" (a changed row), "h node seq" (heartbeat),
// "s node token" (a Sync), "a node token from" (its acknowledgement), "q node" (a replica leaving).
func (b *Bus) handle(payload string) {
	f := strings.Fields(payload)
	if len(f) < 2 {
		return
	}
	if f[0] == "i" {
		b.invalidate(f[1], f[2:])
		return
	}
	now := b.mono()
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case f[0] == "h" && len(f) == 3:
		b.members[f[1]] = now
		if f[1] == b.node {
			if seq, err := strconv.ParseUint(f[2], 10, 64); err == nil {
				if sentAt, ok := b.sent[seq]; ok && sentAt > b.confirmed.Load() {
					b.confirmed.Store(sentAt)
				}
			}
		}
	case f[0] == "s" && len(f) == 3:
		b.members[f[1]] = now
		if f[1] != b.node {
			select {
			case b.out <- "a " + f[1] + " " + f[2] + " " + b.node:
			default: // the sender is stuck; the Sync ends by its timeout
			}
			return
		}
		if w := b.waits[f[2]]; w != nil {
			w.echo(b.node, now, int64(b.o.Window), b.members)
		}
	case f[0] == "a" && len(f) == 4:
		b.members[f[3]] = now
		if w := b.waits[f[2]]; w != nil && f[1] == b.node {
			w.ack(f[3])
		}
	case f[0] == "q":
		delete(b.members, f[1])
		for _, w := range b.waits {
			w.ack(f[1])
		}
	}
}

// echo records that this replica's own Sync token came back: every other replica heard within
// window must now acknowledge (unless it already did).
func (w *wait) echo(self string, now, window int64, members map[string]int64) {
	w.echoed = true
	for m, heard := range members {
		if m != self && now-heard < window && !w.acked[m] {
			w.need[m] = true
		}
	}
	if len(w.need) == 0 {
		close(w.done)
	}
}

// ack records node's acknowledgement; the wait ends when nothing else is needed.
func (w *wait) ack(node string) {
	w.acked[node] = true
	if !w.echoed || !w.need[node] {
		return
	}
	delete(w.need, node)
	if len(w.need) == 0 {
		close(w.done)
	}
}

func (b *Bus) invalidate(table string, tags []string) {
	b.mu.Lock()
	subs := b.tables[table]
	b.mu.Unlock()
	if len(tags) == 1 && tags[0] == "*" {
		tags = nil
	}
	for _, s := range subs {
		s(tags)
	}
}
