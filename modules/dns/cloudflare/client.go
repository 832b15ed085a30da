// Package cloudflare is a small client of the Cloudflare v4 DNS records API: create, delete and
// look up A records of one zone, with the v4 envelope parsed and the provider's error codes
// named. The calls themselves (one timeout bounding each whole, retries of 429 and 5xx honouring
// Retry-After, the outbound budget before every try) are platform/outbound's.
package cloudflare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"provisioner/platform/outbound"
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
// cut off. Its message is what we store and show ("DNS provider timed out"); the cause (the path
// with the zone id, addresses, the transport's wording) is only logged.
type TransportError = outbound.TransportError

// Transient reports whether a later attempt may succeed (outbound.Retryable: 408, 429, 5xx, a
// redirect; or no answer: network, timeout).
func Transient(err error) bool {
	var ae *APIError
	if errors.As(err, &ae) {
		return outbound.Retryable(ae.Status)
	}
	return err != nil
}

// Options configures a Client.
type Options struct {
	BaseURL, ZoneID, Token string
	// Timeout bounds each call whole (its tries and the waits between them); default 10 s.
	Timeout time.Duration
	// Budget is asked before every try; it may wait (queue) and fails only when ctx ends.
	Budget func(ctx context.Context) error
	// Logger gets the details of calls that got no answer (never the token); default: discarded.
	Logger *slog.Logger
}

// Client calls the provider for one zone. Safe for concurrent use. The token is sent only in
// the Authorization header and never appears in errors or logs; errors name neither the URL nor
// the zone id (a call without an answer is a TransportError, its details logged).
type Client struct {
	http *outbound.Client
	zone string
}

// New builds a Client. A call is tried up to 3 times on 429, 5xx and connection errors, waiting
// 200 ms, 400 ms or the provider's Retry-After up to 2 s between tries (under outbound.NoWait, the
// finisher's attempts: no wait, and a Retry-After ends the call).
func New(o Options) *Client {
	budget := o.Budget
	if budget != nil {
		budget = func(ctx context.Context) error {
			if err := o.Budget(ctx); err != nil {
				return fmt.Errorf("outbound budget: %w", err)
			}
			return nil
		}
	}
	return &Client{zone: "/zones/" + url.PathEscape(o.ZoneID) + "/dns_records", http: outbound.New(outbound.Options{
		Name: "DNS provider", BaseURL: o.BaseURL, Accept: "application/json", Bearer: o.Token, Timeout: o.Timeout, Retries: 2, MaxBody: 4 << 20,
		Budget: budget, Logger: o.Logger})}
}

// do makes one provider call (outbound.Client.Do) and reads the v4 envelope of its answer into out.
func (c *Client) do(ctx context.Context, method, path string, body any, out any) error {
	res, err := c.http.Do(ctx, outbound.Request{Method: method, Path: c.zone + path, JSON: body})
	if err != nil {
		return err
	}
	var env envelope
	jerr := json.Unmarshal(res.Body, &env)
	if res.Status >= 300 || jerr != nil || !env.Success {
		ae := &APIError{Status: res.Status, Errors: c.sanitized(env.Errors), Wait: res.RetryAfter()}
		if res.Status < 300 {
			// A 2xx without a v4 envelope saying success: the call may or may not have been carried
			// out, so it is transient (the next attempt looks the name up first).
			ae.Status = http.StatusBadGateway
			ae.Errors = []Message{{Message: fmt.Sprintf("malformed answer from the provider (HTTP %d without success: true)", res.Status)}}
		}
		return ae
	}
	if out != nil {
		if err := json.Unmarshal(env.Result, out); err != nil {
			return &APIError{Status: http.StatusBadGateway, Errors: []Message{{Message: "malformed result from the provider"}}}
		}
	}
	return nil
}

// Bounds of the provider's errors kept in an APIError.
const (
	maxErrors       = 3
	maxErrorMessage = 200
)

// sanitized returns the provider's first errors, their messages redacted (outbound.Client.Redact)
// so an echo of what was sent never puts our token in a record, an answer or the log.
func (c *Client) sanitized(errs []Message) []Message {
	if len(errs) > maxErrors {
		errs = errs[:maxErrors]
	}
	out := make([]Message, len(errs))
	for i, m := range errs {
		out[i] = Message{Code: m.Code, Message: c.http.Redact(m.Message, maxErrorMessage)}
	}
	return out
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
	return &APIError{Status: http.StatusBadGateway,
		Errors: []Message{{Message: "malformed result from the provider: " + problem}}}
}

// Create adds an A record. A success whose result carries no usable record id (empty, too long,
// holding control characters or spaces) or a TTL out of range is a malformed answer.
func (c *Client) Create(ctx context.Context, r Record) (Record, error) {
	r.Type = "A"
	var out Record
	err := c.do(ctx, http.MethodPost, "", r, &out)
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

// Delete removes a record; one that does not exist (Gone: only the provider's own word, 81044 or
// 1032 in a 4xx envelope) is not an error. Any other 404 (a proxy's page, 7003) is a failure.
func (c *Client) Delete(ctx context.Context, id string) error {
	err := c.do(ctx, http.MethodDelete, "/"+url.PathEscape(id), nil, nil)
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
	if err := c.do(ctx, http.MethodGet, "?"+q.Encode(), nil, &out); err != nil {
		return nil, err
	}
	for _, r := range out {
		if p := recordProblem(r); p != "" {
			return nil, malformedRecord("a listed record " + p)
		}
	}
	return out, nil
}
