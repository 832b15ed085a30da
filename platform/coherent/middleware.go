package coherent

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/gofiber/fiber/v2"
	"github.com/uptrace/bun"
)

type writesKey struct{}

// WithWriteMarker returns ctx carrying a marker that WriteHook sets when a statement that may
// change rows runs with ctx (or a context derived from it), and the marker.
func WithWriteMarker(ctx context.Context) (context.Context, *atomic.Bool) {
	m := new(atomic.Bool)
	return context.WithValue(ctx, writesKey{}, m), m
}

// WriteHook is the bun query hook that marks contexts made by WithWriteMarker when they write.
type WriteHook struct{}

var _ bun.QueryHook = WriteHook{}

// BeforeQuery marks the context's marker for anything but reads and transaction control.
func (WriteHook) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	m, _ := ctx.Value(writesKey{}).(*atomic.Bool)
	if m == nil || m.Load() {
		return ctx
	}
	if mayWrite(e) {
		m.Store(true)
	}
	return ctx
}

// AfterQuery does nothing.
func (WriteHook) AfterQuery(context.Context, *bun.QueryEvent) {}

func mayWrite(e *bun.QueryEvent) bool {
	switch strings.TrimRight(strings.ToUpper(e.Operation()), ";") {
	case "SELECT", "BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE", "SHOW", "SET", "LISTEN", "NOTIFY":
		// SELECT … FOR UPDATE locks but does not change; functions with side effects
		// (pg_notify, advisory locks) do not change cached rows. Anything else (INSERT, UPDATE,
		// DELETE, a WITH that may hold either) counts as a write.
		return false
	}
	return true
}

// Middleware gives every request a write marker and, when the request wrote to the control
// database, calls Sync before the answer leaves, so the client's next request reads the effect
// whichever replica serves it. A Sync that cannot be sent is not an error of the request (the
// write itself succeeded or failed on its own); replicas stop trusting their caches soon after.
func Middleware(bus *Bus) fiber.Handler {
	return func(c *fiber.Ctx) error {
		ctx, wrote := WithWriteMarker(c.UserContext())
		c.SetUserContext(ctx)
		err := c.Next()
		if wrote.Load() && bus != nil {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*bus.o.Window)
			_ = bus.Sync(sctx)
			cancel()
		}
		return err
	}
}
