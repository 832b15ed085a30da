// Package reqctx carries what a request is about in its context.Context, for the packages below the
// HTTP layer that need it (audit, db, ratelimit): the request's id, the client's address and user
// agent and its Fiber context (set by httpx), and the caller, the signed-in account the request
// acts for (set by authn's guard). Outside a request every accessor answers the zero value.
package reqctx

import (
	"context"

	"github.com/gofiber/fiber/v2"
	"github.com/uptrace/bun"
)

// Request is what httpx knows of a request when it starts.
type Request struct {
	ID       string
	ClientIP string
	// ClientKey keys the client's per-IP limits: ClientIP, or its prefix for IPv6 (ratelimit.ClientKey).
	ClientKey string
	UserAgent string
	// Fiber is the request's Fiber context; it must not be kept beyond the request.
	Fiber *fiber.Ctx
}

type requestKey struct{}

// none is the Request outside a request.
var none Request

// requestContext holds a Request in one value (one allocation and one lookup).
type requestContext struct {
	context.Context
	r Request
}

// Value answers the request's key and hands every other one on.
func (c *requestContext) Value(key any) any {
	if key == (requestKey{}) {
		return &c.r
	}
	return c.Context.Value(key)
}

// WithRequest is parent carrying r.
func WithRequest(parent context.Context, r Request) context.Context {
	return &requestContext{Context: parent, r: r}
}

func request(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey{}).(*Request)
	if r == nil {
		return &none
	}
	return r
}

// RequestID is the id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string { return request(ctx).ID }

// ClientIP is the client address of the request ctx belongs to, or "".
func ClientIP(ctx context.Context) string { return request(ctx).ClientIP }

// ClientKey is the key of the per-IP limits of the request ctx belongs to, or "".
func ClientKey(ctx context.Context) string { return request(ctx).ClientKey }

// UserAgent is the User-Agent of the request ctx belongs to, or "".
func UserAgent(ctx context.Context) string { return request(ctx).UserAgent }

// Fiber is the Fiber context of the request ctx belongs to, or nil outside a request.
func Fiber(ctx context.Context) *fiber.Ctx { return request(ctx).Fiber }

// Caller is the signed-in account a request acts for: authn's Principal.
type Caller interface {
	// CallerID is the account's user id.
	CallerID() int64
	// LockCaller checks again, within tx, what let the request in (the account is live, its
	// token still valid, its role still sufficient) and locks the account's row until tx ends;
	// nil for a caller no guard let in (background work acting for a user).
	LockCaller(ctx context.Context, tx bun.IDB) error
	// GoneError is the answer when the caller's own account is found missing or deleted while
	// the request is served: the guard's 401 for a token whose subject no longer exists.
	GoneError() error
}

// CallerKey is the context key (and the Fiber Locals key) of the request's Caller.
type CallerKey struct{}

// WithCaller is ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, CallerKey{}, c)
}

// CallerOf is the caller of the request ctx belongs to, or nil.
func CallerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(CallerKey{}).(Caller)
	return c
}
