// Package outbound is the HTTP protocol every provider client shares: a JSON call under a context,
// bounded whole by a timeout, redirects answered rather than followed, the body read up to a
// bound, the outbound budget consulted before every try, retries of retryable answers within the
// call (honouring Retry-After, or without waiting under NoWait), and failures without an answer
// classified (timed out, unreachable, never sent) with no secret in their text. What an answer
// means (paths, payloads, the provider's error codes) is left to the provider's client.
package outbound

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"provisioner/platform/redact"
)

// Options configures a Client.
type Options struct {
	// Name names the provider in errors and logs ("DNS provider").
	Name    string
	BaseURL string
	// Accept is the Accept header of every call when set ("application/json"; RabbitMQ's
	// management API answers some calls 406 with it).
	Accept string
	// Bearer is sent as "Authorization: Bearer …"; User and Password as basic
	// authentication (when either is set). Both are secrets: never in an error or a log line.
	Bearer, User, Password string
	// Timeout bounds each call whole (its tries and the waits between them), counted from its
	// first try; default 10 s. A try that timed out is not repeated within the call.
	Timeout time.Duration
	// Retries of a retryable failure (Retryable, or a connection error) within one call while
	// Timeout leaves time; default 0. Under NoWait they are made without waiting.
	Retries int
	// MaxRetryWait caps a wait between tries (200 ms, doubling, or the answer's Retry-After); a
	// longer Retry-After ends the call with that answer. Default 2 s.
	MaxRetryWait time.Duration
	// MaxBody bounds the answer's body read; default 1 MiB. A longer body is cut at the bound.
	MaxBody int64
	// Budget is asked before every try; its error ends the call as it is (nothing was sent).
	Budget func(ctx context.Context) error
	HTTP   *http.Client
	// Logger gets the details of calls without an answer (secrets scrubbed); default: discarded.
	Logger *slog.Logger
}

// Client makes calls to one provider; safe for concurrent use.
type Client struct{ o Options }

// New builds a Client. Its HTTP client never follows a redirect: followed, a 301/302 turns a
// DELETE or a POST into a GET, whose 200 would pass for a deletion or a creation that never
// happened. The redirect is answered as it is (Retryable).
func New(o Options) *Client {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	o.Retries = max(o.Retries, 0)
	if o.MaxRetryWait <= 0 {
		o.MaxRetryWait = 2 * time.Second
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 1 << 20
	}
	hc := http.Client{}
	if o.HTTP != nil {
		hc = *o.HTTP
	}
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	o.HTTP = &hc
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	return &Client{o: o}
}

// Configured reports whether a base address is set.
func (c *Client) Configured() bool { return c.o.BaseURL != "" }

// Redact is msg made fit to store, show and log (redact.Message): bounded to max bytes, nothing
// token-like, none of the client's secrets, even echoed by the provider.
func (c *Client) Redact(msg string, max int) string {
	return redact.Message(msg, max, c.o.Bearer, c.o.Password)
}

// Request is one call.
type Request struct {
	Method, Path string
	// JSON, when not nil, is encoded as the body; otherwise Body, when not nil, is sent as it is.
	// Either is sent as application/json.
	JSON   any
	Body   []byte
	Header http.Header
}

// Response is the provider's answer: any status, its body read up to Options.MaxBody.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// RetryAfter is the answer's Retry-After, 0 when it asks for no wait.
func (r *Response) RetryAfter() time.Duration {
	return ParseRetryAfter(r.Header.Get("Retry-After"), time.Now())
}

// OK reports whether the status is 2xx.
func (r *Response) OK() bool { return r.Status >= 200 && r.Status < 300 }

// Retryable reports whether a later try may get another answer: a redirect (not followed), 408,
// 429 or a 5xx.
func Retryable(status int) bool {
	return (status >= 300 && status < 400) || status == http.StatusRequestTimeout ||
		status == http.StatusTooManyRequests || status >= 500
}

// Refusal reports whether the status is a 4xx no retry changes (not 408 nor 429).
func Refusal(status int) bool { return status >= 400 && status < 500 && !Retryable(status) }

// TransportError is a call that got no (whole) answer. Its text names the provider and what
// happened ("DNS provider timed out"), never the address or a secret; the cause is logged.
type TransportError struct {
	Name string
	// What happened: one of the What… constants.
	What string
	Err  error
	// NotSent: no try of this call obtained a connection, so the request cannot have reached the
	// provider.
	NotSent bool
}

// What a TransportError says happened.
const (
	WhatTimedOut  = "timed out"
	WhatCancelled = "call cancelled"
	WhatNoAnswer  = "unreachable"
	WhatCutOff    = "connection lost while answering"
	WhatBadURL    = "request could not be built"
)

func (e *TransportError) Error() string { return e.Name + " " + e.What }

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

// TimedOut reports whether err is a try that got no answer in time.
func TimedOut(err error) bool {
	var te *TransportError
	return errors.As(err, &te) && te.What == WhatTimedOut
}

// NotSent reports whether err certainly never reached the provider: a TransportError without a
// connection. A budget's refusal is the Budget's own error; the caller knows it.
func NotSent(err error) bool {
	var te *TransportError
	return errors.As(err, &te) && te.NotSent
}

// noWait marks a context whose calls never sleep between tries.
type noWait struct{}

// NoWait returns ctx whose calls never sleep between tries: a retryable failure is tried again at
// once (each try through the Budget, which paces them), and an answer asking for a wait
// (Retry-After) ends the call. For a caller that retries later itself (the finisher, with the
// row's backoff and no sooner than Retry-After) and must not hold its worker idle.
func NoWait(ctx context.Context) context.Context { return context.WithValue(ctx, noWait{}, true) }

// Do makes the call: its tries (Retries, while Timeout leaves time; not after a timeout, nor on
// a Retry-After above MaxRetryWait, nor on any Retry-After under NoWait) and the waits between
// them (none under NoWait). It returns the last answer, whatever its status, or the error of a
// call without one: a *TransportError, the Budget's error, or an encoding error.
func (c *Client) Do(ctx context.Context, r Request) (*Response, error) {
	body := r.Body
	if r.JSON != nil {
		var err error
		if body, err = json.Marshal(r.JSON); err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
	}
	if err := c.budget(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	now, _ := ctx.Value(noWait{}).(bool)
	reached := false // an earlier try of the call may have reached the provider
	for try := 1; ; try++ {
		res, err := c.once(ctx, r, body)
		var te *TransportError
		if errors.As(err, &te) && reached {
			te.NotSent = false
		}
		reached = reached || res != nil || (te != nil && !te.NotSent)
		if try > c.o.Retries || ctx.Err() != nil || !retryable(res, err) {
			return res, err
		}
		wait := time.Duration(100<<try) * time.Millisecond
		if res != nil && res.RetryAfter() > 0 {
			wait = res.RetryAfter()
		} else if now {
			wait = 0
		}
		if (now && wait > 0) || wait > c.o.MaxRetryWait || time.Until(deadline) <= wait {
			return res, err
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return res, err
			case <-time.After(wait):
			}
		}
		if c.budget(ctx) != nil {
			return res, err
		}
	}
}

// retryable reports whether a try's outcome may be tried again within the call: a retryable
// status, or a connection error other than a timeout.
func retryable(res *Response, err error) bool {
	var te *TransportError
	if errors.As(err, &te) {
		return te.What != WhatTimedOut && te.What != WhatBadURL
	}
	return err == nil && Retryable(res.Status)
}

func (c *Client) budget(ctx context.Context) error {
	if c.o.Budget == nil {
		return nil
	}
	return c.o.Budget(ctx)
}

func (c *Client) once(ctx context.Context, r Request, body []byte) (*Response, error) {
	// A request for which no connection was ever obtained cannot have reached the provider (the
	// transport may retry on a new connection one whose first connection broke: that one had one).
	var connected atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }})
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, c.o.BaseURL+r.Path, rd)
	if err != nil {
		return nil, c.failed(r, &TransportError{Name: c.o.Name, What: WhatBadURL, Err: err, NotSent: true})
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	if c.o.Accept != "" {
		req.Header.Set("Accept", c.o.Accept)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.o.Bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.o.Bearer)
	} else if c.o.User != "" || c.o.Password != "" {
		req.SetBasicAuth(c.o.User, c.o.Password)
	}
	res, err := c.o.HTTP.Do(req)
	if err != nil {
		return nil, c.failed(r, c.transportError(ctx, err, WhatNoAnswer, !connected.Load()))
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, c.o.MaxBody))
	if err != nil {
		return nil, c.failed(r, c.transportError(ctx, err, WhatCutOff, false))
	}
	return &Response{Status: res.StatusCode, Header: res.Header, Body: data}, nil
}

// transportError classifies a failed try's cause: a timeout, a call cancelled by its caller, or
// otherwise what.
func (c *Client) transportError(ctx context.Context, err error, what string, notSent bool) *TransportError {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		what = WhatTimedOut
	case ctx.Err() != nil:
		what = WhatCancelled
	}
	return &TransportError{Name: c.o.Name, What: what, Err: err, NotSent: notSent}
}

// failed logs the details of a try without an answer (its path without the query, the cause
// without the URL; no secret in either) and returns te.
func (c *Client) failed(r Request, te *TransportError) error {
	path, _, _ := strings.Cut(r.Path, "?")
	cause := te.Err
	var ue *url.Error
	if errors.As(cause, &ue) {
		cause = ue.Err
	}
	c.o.Logger.Warn(c.o.Name+" call failed", "method", r.Method, "path", c.scrub(path), "result", te.What,
		"error", c.scrub(cause.Error()))
	return te
}

// scrub is s without the client's secrets.
func (c *Client) scrub(s string) string {
	for _, secret := range []string{c.o.Bearer, c.o.Password} {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "…")
		}
	}
	return s
}
