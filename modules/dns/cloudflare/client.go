// Package cloudflare is a small client of the Cloudflare v4 DNS records API: create, delete and
// look up A records of one zone, with the v4 envelope parsed, one timeout bounding every call
// whole, retries of 429 and 5xx honouring Retry-After within it, and an outbound budget consulted
// before every try.
package cloudflare

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"provisioner/platform/provision"
	"provisioner/platform/redact"
)

// Error codes the provider uses for DNS records.
const (
	CodeRecordNotFound  = 81044 // DELETE of a record that does not exist ("Record does not exist.", 404)
	CodeInvalidRecordID = 1032  // DELETE of a record id the zone does not know ("Invalid DNS record identifier", 400)
	CodeNameExists      = 81053 // a record with that host already exists
	CodeRecordExists    = 81057 // the record already exists
	CodeIdenticalRecord = 81058 // an identical record already exists
)

// Record is a DNS record as the provider describes it.
type Record struct {
	ID      string `json:"id,omitempty"`
	Type    string `json:"type"`
	Name    string `json:"name"`
	Content string `json:"content"`
	TTL     int    `json:"ttl"`
	Proxied bool   `json:"proxied"`
	Comment string `json:"comment,omitempty"`
}

// Message is one item of the envelope's errors or messages.
type Message struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type envelope struct {
	Success  bool            `json:"success"`
	Errors   []Message       `json:"errors"`
	Messages []Message       `json:"messages"`
	Result   json.RawMessage `json:"result"`
}

// APIError is a failed call: the HTTP status and the provider's errors, their messages sanitised
// (no token, nothing credential-like, bounded), so its text may be stored, shown and logged.
type APIError struct {
	Status int
	Errors []Message
	// Wait is the provider's Retry-After (a 429, a 503), 0 when it sent none.
	Wait time.Duration
	// malformed: a 2xx we could not read (the call was likely carried out): not repeated within
	// the call; the finisher's next attempt looks the name up first.
	malformed bool
}

// RetryAfter implements provision.RetryAfterer: the background finisher schedules the next
// attempt no sooner than the provider asked.
func (e *APIError) RetryAfter() time.Duration { return e.Wait }

func (e *APIError) Error() string {
	if len(e.Errors) == 0 {
		return fmt.Sprintf("dns provider answered %d", e.Status)
	}
	parts := make([]string, len(e.Errors))
	for i, m := range e.Errors {
		parts[i] = fmt.Sprintf("[%d] %s", m.Code, m.Message)
	}
	return fmt.Sprintf("dns provider answered %d: %s", e.Status, strings.Join(parts, "; "))
}

// Has reports whether the provider answered with code.
func (e *APIError) Has(code int) bool {
	for _, m := range e.Errors {
		if m.Code == code {
			return true
		}
	}
	return false
}

// TransportError is a call that got no (whole) answer from the provider: unreachable, timed out,
// cut off. Its message is what we store and show ("DNS provider timed out"); the cause (the URL
// with the zone id, addresses, the transport's wording) is only logged by the client.
type TransportError struct {
	Msg string
	Err error
}

func (e *TransportError) Error() string { return e.Msg }

// Unwrap returns the cause, for logs and errors.Is.
func (e *TransportError) Unwrap() error { return e.Err }

const msgTimedOut = "DNS provider timed out"

// transportError classifies a failed call's cause into a TransportError: a timeout, a call
// cancelled by its caller, or otherwise msg.
func transportError(ctx context.Context, err error, msg string) *TransportError {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return &TransportError{Msg: msgTimedOut, Err: err}
	case ctx.Err() != nil:
		return &TransportError{Msg: "DNS provider call cancelled", Err: err}
	default:
		return &TransportError{Msg: msg, Err: err}
	}
}

// Transient reports whether a later attempt may succeed (429, 5xx, a redirect, network, timeout).
func Transient(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status == http.StatusTooManyRequests || ae.Status >= 500 || (ae.Status >= 300 && ae.Status < 400)
	}
	return err != nil
}

// Options configures a Client.
type Options struct {
	BaseURL, ZoneID, Token string
	// Timeout bounds each call whole (its tries and the waits between them, from its first try);
	// default 10 s. A try that timed out is not repeated within the call.
	Timeout time.Duration
	// Retries of one call on 429/5xx/connection errors, while Timeout leaves time; default 2 (3 tries).
	Retries int
	// MaxRetryWait caps a Retry-After or backoff wait inside one call; default 2 s. A longer
	// Retry-After ends the call with the error (the finisher retries later).
	MaxRetryWait time.Duration
	// Budget is asked before every call; it may wait (queue) and fails only when ctx ends.
	Budget func(ctx context.Context) error
	HTTP   *http.Client
	// Logger gets the details of calls that got no answer (never the token); default: discarded.
	Logger *slog.Logger
}

// Client calls the provider for one zone. Safe for concurrent use. The token is sent only in
// the Authorization header and never appears in errors or logs; errors name neither the URL nor
// the zone id (a call without an answer is a TransportError, its details logged).
type Client struct{ o Options }

// New builds a Client.
func New(o Options) *Client {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Retries < 0 {
		o.Retries = 0
	} else if o.Retries == 0 {
		o.Retries = 2
	}
	if o.MaxRetryWait <= 0 {
		o.MaxRetryWait = 2 * time.Second
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	if o.HTTP.CheckRedirect == nil {
		// A redirect is not followed but answered as it is (a transient failure): followed, a
		// 301/302 turns a DELETE (or a POST) into a GET, whose 200 envelope would pass for a
		// deletion (or a creation) that never happened.
		hc := *o.HTTP
		hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		o.HTTP = &hc
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	return &Client{o: o}
}

// do makes one provider call. The whole call (its tries and the waits between them) is bounded
// by Timeout, counted from its first try (after any wait for the outbound budget): a retry of a
// 429, a 5xx or a connection error is made only while time is left, and a try that timed out is
// never repeated within the call, so a slow provider costs the caller at most one Timeout per
// call; the finisher retries later with its backoff.
func (c *Client) do(ctx context.Context, method, path string, body any, out any) error {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encode request: %w", err)
		}
	}
	if err := c.budget(ctx); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	var last error
	for attempt := 0; attempt <= c.o.Retries; attempt++ {
		if attempt > 0 {
			wait := time.Duration(200<<(attempt-1)) * time.Millisecond
			var ae *APIError
			if errors.As(last, &ae) && ae.Wait > 0 {
				wait = ae.Wait
			}
			if wait > c.o.MaxRetryWait || time.Until(deadline) <= wait {
				return last
			}
			select {
			case <-ctx.Done():
				return last
			case <-time.After(wait):
			}
			if err := c.budget(ctx); err != nil {
				return last
			}
		}
		last = c.once(ctx, method, path, raw, out)
		if last == nil || !Transient(last) || ctx.Err() != nil || timedOut(last) || malformed(last) {
			return last
		}
	}
	return last
}

// malformed reports whether err is a 2xx answer we could not read.
func malformed(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.malformed
}

// timedOut reports whether err is a try that got no answer in time.
func timedOut(err error) bool {
	var te *TransportError
	return errors.As(err, &te) && te.Msg == msgTimedOut
}

func (c *Client) budget(ctx context.Context) error {
	if c.o.Budget == nil {
		return nil
	}
	if err := c.o.Budget(ctx); err != nil {
		return fmt.Errorf("outbound budget: %w", err)
	}
	return nil
}

func (c *Client) once(ctx context.Context, method, path string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.o.BaseURL+path, bytes.NewReader(body))
	if err != nil {
		return c.failed(method, path, &TransportError{Msg: "DNS provider request could not be built (check Dns:BaseUrl)", Err: err})
	}
	req.Header.Set("Authorization", "Bearer "+c.o.Token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	res, err := c.o.HTTP.Do(req)
	if err != nil {
		return c.failed(method, path, transportError(ctx, err, "DNS provider unreachable"))
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	if err != nil {
		return c.failed(method, path, transportError(ctx, err, "DNS provider connection lost while answering"))
	}
	var env envelope
	jerr := json.Unmarshal(data, &env)
	if res.StatusCode >= 300 || jerr != nil || !env.Success {
		ae := &APIError{Status: res.StatusCode, Errors: c.sanitized(env.Errors)}
		if res.StatusCode < 300 {
			// A 2xx that is not a v4 envelope with success: true (not JSON, or success missing or
			// false) is no answer we can read: the call may or may not have been carried out, so it
			// is transient (the next attempt looks the name up first).
			ae.Status, ae.malformed = http.StatusBadGateway, true
			ae.Errors = []Message{{Message: fmt.Sprintf("malformed answer from the provider (HTTP %d without success: true)", res.StatusCode)}}
		}
		ae.Wait = provision.ParseRetryAfter(res.Header.Get("Retry-After"), time.Now())
		return ae
	}
	if out != nil {
		if err := json.Unmarshal(env.Result, out); err != nil {
			return &APIError{Status: http.StatusBadGateway, malformed: true, Errors: []Message{{Message: "malformed result from the provider"}}}
		}
	}
	return nil
}

// Bounds of the provider's errors kept in an APIError.
const (
	maxErrors       = 3
	maxErrorMessage = 200
)

// sanitized returns the provider's first errors with their messages made fit to store, show and
// log (redact.Message): a provider that echoes what it was sent (the Authorization header, the
// token) never gets our token into a record, an answer or the log. The codes are kept as sent.
func (c *Client) sanitized(errs []Message) []Message {
	if len(errs) > maxErrors {
		errs = errs[:maxErrors]
	}
	out := make([]Message, len(errs))
	for i, m := range errs {
		out[i] = Message{Code: m.Code, Message: redact.Message(m.Message, maxErrorMessage, c.o.Token)}
	}
	return out
}

// failed logs the details of a call that got no answer and returns its sanitised error.
func (c *Client) failed(method, path string, te *TransportError) error {
	c.o.Logger.Warn("dns provider call failed", "method", method, "path", redactPath(path), "result", te.Msg,
		"error", scrub(te.Err, c.o.Token).Error())
	return te
}

func scrub(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "…"))
}

func redactPath(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		return p[:i]
	}
	return p
}

// Bounds of a record as the provider describes it: its id is stored, shown and put in a delete's
// path (Cloudflare's are 32 hex digits); its TTL is stored (an int column: 1 is automatic,
// Cloudflare's largest is 86400).
const (
	MaxRecordID = 128
	MaxTTL      = math.MaxInt32
)

// recordProblem says what makes r, a record the provider answered with, unfit to store, or "".
func recordProblem(r Record) string {
	switch {
	case r.ID == "":
		return "without an id"
	case len(r.ID) > MaxRecordID || !utf8.ValidString(r.ID) || strings.ContainsFunc(r.ID, func(c rune) bool { return unicode.IsControl(c) || unicode.IsSpace(c) }):
		return fmt.Sprintf("whose id is not at most %d printable characters", MaxRecordID)
	case r.TTL < 0 || r.TTL > MaxTTL:
		return "whose TTL is out of range"
	}
	return ""
}

// malformedRecord is the error of an answer holding a record unfit to store: transient, like any
// malformed answer (the next attempt looks the name up first). What was wrong is named, the value
// never (it may hold anything: a NUL, a forged log line).
func malformedRecord(problem string) *APIError {
	return &APIError{Status: http.StatusBadGateway, malformed: true,
		Errors: []Message{{Message: "malformed result from the provider: " + problem}}}
}

// Create adds an A record. A success whose result carries no usable record id (empty, too long,
// holding control characters or spaces) or a TTL out of range is a malformed answer.
func (c *Client) Create(ctx context.Context, r Record) (Record, error) {
	r.Type = "A"
	var out Record
	err := c.do(ctx, http.MethodPost, "/zones/"+url.PathEscape(c.o.ZoneID)+"/dns_records", r, &out)
	if err != nil {
		return Record{}, err
	}
	if p := recordProblem(out); p != "" {
		// We cannot tell which record (if any) was made. Transient: the next attempt looks the
		// name up first.
		return Record{}, malformedRecord("a created record " + p)
	}
	return out, nil
}

// Delete removes a record; a record that does not exist is not an error. Only the provider's own
// word says so: a 4xx envelope carrying 81044 ("Record does not exist.") or 1032 ("Invalid DNS
// record identifier"). Any other 404 (a proxy's HTML page, 7003 "Could not route to …", an
// envelope without those codes) is a failure like any other: the record may well still be there.
func (c *Client) Delete(ctx context.Context, id string) error {
	err := c.do(ctx, http.MethodDelete, "/zones/"+url.PathEscape(c.o.ZoneID)+"/dns_records/"+url.PathEscape(id), nil, nil)
	if Gone(err) {
		return nil
	}
	return err
}

// Gone reports whether err is the provider's answer that a record does not exist.
func Gone(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && (ae.Has(CodeRecordNotFound) || ae.Has(CodeInvalidRecordID))
}

// Lookup lists the records named fqdn, of every type: an AAAA, CNAME, TXT or MX record holds the
// name as much as an A record does.
func (c *Client) Lookup(ctx context.Context, fqdn string) ([]Record, error) {
	var out []Record
	q := url.Values{"name": {fqdn}, "per_page": {"100"}}
	if err := c.do(ctx, http.MethodGet, "/zones/"+url.PathEscape(c.o.ZoneID)+"/dns_records?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	for _, r := range out {
		if p := recordProblem(r); p != "" {
			return nil, malformedRecord("a listed record " + p)
		}
	}
	return out, nil
}
