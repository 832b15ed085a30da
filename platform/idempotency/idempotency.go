// Package idempotency gives the operations registered as httpx.Idempotent Stripe's Idempotency-Key:
// the first answer to a key (status, body, Content-Type and Location) is kept 24 hours per user,
// operation and key; a retry with the same key and the same request (path, query, body) gets it
// again with Idempotent-Replayed: true and runs nothing; the same key with another request is a
// 422; while the first request runs, a 409. Keys live in the control database (idempotency_keys),
// shared by every replica; answers and request digests are sealed with Secrets:EncryptionKey.
package idempotency

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"
	"github.com/gofiber/fiber/v2"
	"github.com/uptrace/bun"
	"github.com/valyala/fasthttp"

	"provisioner/platform/fault"
	"provisioner/platform/httpx"
	"provisioner/platform/reqctx"
	"provisioner/platform/secrets"
)

// Options tune a Store; zero values take the defaults.
type Options struct {
	// Retention is how long an answer is kept (24 hours).
	Retention time.Duration
	// Lease is how long a request in flight holds its key without renewing it (30 s); it is
	// renewed every third of it while the request runs, so a key whose process died is free
	// again within a lease.
	Lease time.Duration
	// SweepEvery is how often Start deletes the expired keys (a minute).
	SweepEvery time.Duration
	Logger     *slog.Logger
}

// Store keeps the answers of idempotent requests in the control database. Safe for concurrent use.
type Store struct {
	db     bun.IDB
	sealer *secrets.Sealer
	o      Options
	log    *slog.Logger
	stop   chan struct{}
	done   sync.WaitGroup
}

// New returns a Store on db sealing with sealer.
func New(db bun.IDB, sealer *secrets.Sealer, o Options) *Store {
	if o.Retention <= 0 {
		o.Retention = 24 * time.Hour
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Store{db: db, sealer: sealer, o: o, log: o.Logger}
}

// answer is a kept response.
type answer struct {
	Status  int               `json:"-"`
	Headers map[string]string `json:"h,omitempty"`
	Body    []byte            `json:"b"`
}

// keptHeaders are the response headers kept with an answer (the others, the rate limits and the
// request id, belong to each request).
var keptHeaders = []string{fiber.HeaderContentType, fiber.HeaderLocation}

// kept reports whether an answer of status is kept: not the refusals of requests the operation
// did not carry out (malformed, unauthenticated, forbidden, rate-limited, a dependency down),
// which a retry with the same key may send again.
func kept(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity, http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return false
	}
	return true
}

// Middleware implements httpx.Idempotency: a request without the header runs as usual.
func (s *Store) Middleware(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		fc := humafiber.Unwrap(ctx)
		key, given, bad := keyOf(&fc.Request().Header)
		caller := reqctx.CallerOf(ctx.Context())
		switch {
		case !given || caller == nil:
			next(ctx)
			return
		case bad != nil:
			writeError(ctx, bad)
			return
		}
		e := entry{user: caller.CallerID(), operation: ctx.Operation().OperationID, key: key}
		sum := digest([]byte(fc.Method()), []byte(fc.Path()), fc.Request().URI().QueryString(), canonicalBody(fc.Request().Body()))
		o, err := s.claim(ctx.Context(), e, sum)
		switch {
		case err != nil:
			out := httpx.FromError(err)
			if out.Status >= 500 {
				s.log.ErrorContext(ctx.Context(), "idempotency key", "requestId", reqctx.RequestID(ctx.Context()), "error", err.Error())
			}
			writeError(ctx, out)
		case o.kept != nil:
			for k, v := range o.kept.Headers {
				ctx.SetHeader(k, v)
			}
			ctx.SetHeader(httpx.ReplayedHeader, "true")
			ctx.SetStatus(o.kept.Status)
			_, _ = ctx.BodyWriter().Write(o.kept.Body)
		case o.inFlight:
			writeError(ctx, httpx.NewError(http.StatusConflict, "A request with this Idempotency-Key is still being answered; "+
				"send it again once that one is answered"))
		case o.mismatch:
			writeError(ctx, httpx.NewError(http.StatusUnprocessableEntity, "This Idempotency-Key was already used with "+
				"another request (path or body); use a new key for a new request"))
		default:
			s.run(ctx, fc, e, o.owner, next)
		}
	}
}

// run answers the request that owns e, renewing its lease meanwhile, and keeps its answer (or
// releases the key when the answer is not kept). A handler that panics is answered 500 by the
// server's recoverer: that answer is kept.
func (s *Store) run(ctx huma.Context, fc *fiber.Ctx, e entry, owner string, next func(huma.Context)) {
	bg := context.WithoutCancel(ctx.Context())
	stop := s.renew(bg, e, owner)
	finished := false
	defer func() {
		stop()
		a := &answer{Status: http.StatusInternalServerError, Body: panicBody,
			Headers: map[string]string{fiber.HeaderContentType: fiber.MIMEApplicationJSON}}
		if finished {
			a = captured(fc)
		}
		sctx, cancel := context.WithTimeout(bg, 5*time.Second)
		defer cancel()
		var err error
		if kept(a.Status) {
			err = s.keep(sctx, e, owner, a)
		} else {
			err = s.release(sctx, e, owner)
		}
		if err != nil {
			// The answer still goes out; a retry finds the key in flight until its lease lapses.
			s.log.ErrorContext(bg, "idempotency key", "operation", e.operation, "error", err.Error())
		}
	}()
	next(ctx)
	finished = true
}

// panicBody is what the server's recoverer answers.
var panicBody, _ = json.Marshal(httpx.NewError(http.StatusInternalServerError, "An unexpected error occurred"))

// renew extends e's lease every third of it until stop is called.
func (s *Store) renew(ctx context.Context, e entry, owner string) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(s.o.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := s.extend(ctx, e, owner); err != nil {
					s.log.WarnContext(ctx, "renew idempotency key", "operation", e.operation, "error", err.Error())
				}
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// captured is the answer the handler wrote.
func captured(fc *fiber.Ctx) *answer {
	res := fc.Response()
	a := &answer{Status: res.StatusCode(), Body: bytes.Clone(res.Body()), Headers: map[string]string{}}
	for _, h := range keptHeaders {
		if v := res.Header.Peek(h); len(v) > 0 {
			a.Headers[h] = string(v)
		}
	}
	return a
}

func (s *Store) seal(e entry, a *answer) (string, error) {
	raw, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("encode idempotent answer: %w", err)
	}
	return s.sealer.Seal(raw, e.aad("answer"))
}

func (s *Store) open(e entry, status int, sealed string) (*answer, error) {
	raw, err := s.sealer.Open(sealed, e.aad("answer"))
	if err != nil {
		return nil, fmt.Errorf("open idempotent answer: %w", err)
	}
	a := &answer{Status: status}
	if err := json.Unmarshal(raw, a); err != nil {
		return nil, fmt.Errorf("decode idempotent answer: %w", err)
	}
	return a, nil
}

// keyOf reads the Idempotency-Key header: given once, 1 to MaxIdempotencyKey printable ASCII
// characters; otherwise bad is the 400.
func keyOf(h *fasthttp.RequestHeader) (key string, given bool, bad *httpx.Error) {
	vs := h.PeekAll(httpx.IdempotencyKeyHeader)
	if len(vs) == 0 {
		return "", false, nil
	}
	invalid := func(why string) *httpx.Error {
		return httpx.FromError(fault.InvalidField(httpx.IdempotencyKeyHeader, why))
	}
	if len(vs) > 1 {
		return "", true, invalid(fmt.Sprintf("must be given once (it was given %d times)", len(vs)))
	}
	v := vs[0]
	if len(v) == 0 || len(v) > httpx.MaxIdempotencyKey {
		return "", true, invalid(fmt.Sprintf("must be 1 to %d characters", httpx.MaxIdempotencyKey))
	}
	for _, c := range v {
		if c < 0x20 || c > 0x7e {
			return "", true, invalid("must hold printable ASCII characters only")
		}
	}
	return string(v), true, nil
}

// canonicalBody is a JSON body with its members sorted and no insignificant white space, so that
// a client serializing the same request again in another order sends the same request; any other
// body as it is.
func canonicalBody(body []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}

// writeError answers e as the envelope.
func writeError(ctx huma.Context, e *httpx.Error) {
	for k, v := range e.GetHeaders() {
		ctx.SetHeader(k, v[0])
	}
	ctx.SetHeader(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	ctx.SetStatus(e.Status)
	raw, _ := json.Marshal(e)
	_, _ = ctx.BodyWriter().Write(raw)
}

var _ httpx.Idempotency = (*Store)(nil)
