package httpx

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jackc/pgx/v5/pgconn"

	"provisioner/platform/fault"
)

// Sentinel errors that any package may return (wrapped or not); the one error mapper turns them into
// the envelope with the status named in each comment. They are platform/fault's, so a *fault.Error
// of a kind and these match each other.
var (
	// ErrNotFound is 404: an unknown resource, or another user's.
	ErrNotFound = fault.ErrNotFound
	// ErrConflict is 409: duplicate, quota reached, illegal state change.
	ErrConflict = fault.ErrConflict
	// ErrInvalid is 400: the request is well-formed but not acceptable.
	ErrInvalid = fault.ErrInvalid
	// ErrUnauthorized is 401.
	ErrUnauthorized = fault.ErrUnauthorized
	// ErrForbidden is 403.
	ErrForbidden = fault.ErrForbidden
	// ErrUpstream is 502: an external provider failed.
	ErrUpstream = fault.ErrUpstream
	// ErrUnavailable is 503: a dependency needed for this request is down.
	ErrUnavailable = fault.ErrUnavailable
	// ErrCharset is 415: a request body declared in a charset other than UTF-8.
	ErrCharset = errors.New("unsupported charset")
)

// FieldError names one invalid field of a request.
type FieldError = fault.FieldError

// Error is an error that carries its HTTP status, the client-facing message and, optionally,
// field errors and data (e.g. the resource as stored when a provider failed). It is also the
// body written for every error response.
type Error struct {
	Status  int          `json:"-"`
	Success bool         `json:"success" doc:"Always false for errors."`
	Message string       `json:"message" doc:"Human-readable description of the error." example:"Not found"`
	Data    any          `json:"data" doc:"null, or the resource as stored (a 502, an administrator's DNS retry's 409), or the checks of /readyz (503)."`
	Errors  []FieldError `json:"errors,omitempty" doc:"Every invalid field, for validation failures (400)."`
	// headers are extra response headers (e.g. Retry-After).
	headers map[string]string
	cause   error
}

// Error returns the client-facing message.
func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %v", e.Message, e.cause)
	}
	return e.Message
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.cause }

// GetStatus implements huma.StatusError.
func (e *Error) GetStatus() int { return e.Status }

// ContentType keeps errors as plain JSON rather than problem+json.
func (e *Error) ContentType(string) string { return "application/json" }

// GetHeaders implements huma.HeadersError.
func (e *Error) GetHeaders() http.Header {
	h := http.Header{}
	for k, v := range e.headers {
		h.Set(k, v)
	}
	return h
}

// WithHeader returns e with a response header added.
func (e *Error) WithHeader(k, v string) *Error {
	if e.headers == nil {
		e.headers = map[string]string{}
	}
	e.headers[k] = v
	return e
}

// WithData returns e carrying data in the envelope.
func (e *Error) WithData(data any) *Error {
	e.Data = data
	return e
}

// NewError builds an Error with the given status and client-facing message.
func NewError(status int, message string) *Error {
	if message == "" {
		message = http.StatusText(status)
	}
	return &Error{Status: status, Message: message}
}

// NotFound is a 404 with message.
func NotFound(message string) *Error { return wrap(http.StatusNotFound, message, ErrNotFound) }

// Conflict is a 409 with message.
func Conflict(message string) *Error { return wrap(http.StatusConflict, message, ErrConflict) }

// BadRequest is a 400 with message and optional field errors.
func BadRequest(message string, fields ...FieldError) *Error {
	e := wrap(http.StatusBadRequest, message, ErrInvalid)
	e.Errors = fields
	return e
}

// Unauthorized is a 401 with message.
func Unauthorized(message string) *Error {
	return wrap(http.StatusUnauthorized, message, ErrUnauthorized)
}

// Forbidden is a 403 with message.
func Forbidden(message string) *Error { return wrap(http.StatusForbidden, message, ErrForbidden) }

// BadGateway is a 502 carrying the resource as stored.
func BadGateway(message string, data any) *Error {
	e := wrap(http.StatusBadGateway, message, ErrUpstream)
	e.Data = data
	return e
}

// Unavailable is a 503 with message.
func Unavailable(message string) *Error {
	return wrap(http.StatusServiceUnavailable, message, ErrUnavailable)
}

func wrap(status int, message string, cause error) *Error {
	e := NewError(status, message)
	e.cause = cause
	return e
}

// FromError maps any error to the Error written to the client. Sentinels map to their status;
// anything else is a 500 whose message says nothing about internals.
func FromError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if fe, ok := fault.As(err); ok {
		return fromFault(fe)
	}
	var sc interface{ Status() int }
	if errors.As(err, &sc) && sc.Status() >= 400 {
		out := NewError(sc.Status(), err.Error())
		if h, ok := err.(interface{ GetHeaders() http.Header }); ok {
			for k := range h.GetHeaders() {
				out.WithHeader(k, h.GetHeaders().Get(k))
			}
		}
		return out
	}
	if isConnectionError(err) {
		return NewError(http.StatusServiceUnavailable, "A dependency is unavailable; try again later")
	}
	if isConcurrencyFailure(err) {
		return NewError(http.StatusServiceUnavailable, "A concurrent change got in the way; try again").WithHeader("Retry-After", "1")
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return NewError(http.StatusNotFound, "Not found")
	case errors.Is(err, ErrConflict):
		return NewError(http.StatusConflict, err.Error())
	case errors.Is(err, ErrInvalid):
		return NewError(http.StatusBadRequest, err.Error())
	case errors.Is(err, ErrUnauthorized):
		return NewError(http.StatusUnauthorized, "Unauthorized")
	case errors.Is(err, ErrForbidden):
		return NewError(http.StatusForbidden, "Forbidden")
	case errors.Is(err, ErrUpstream):
		return NewError(http.StatusBadGateway, "An external provider failed")
	case errors.Is(err, ErrUnavailable):
		return NewError(http.StatusServiceUnavailable, "A dependency is unavailable; try again later")
	}
	return NewError(http.StatusInternalServerError, "An unexpected error occurred")
}

// faultStatus is the one mapping of a domain error's kind to its HTTP status.
var faultStatus = map[fault.Kind]int{
	fault.KindNotFound: http.StatusNotFound, fault.KindConflict: http.StatusConflict,
	fault.KindInvalid: http.StatusBadRequest, fault.KindUnauthorized: http.StatusUnauthorized,
	fault.KindForbidden: http.StatusForbidden, fault.KindUpstream: http.StatusBadGateway,
	fault.KindUnavailable: http.StatusServiceUnavailable, fault.KindTooMany: http.StatusTooManyRequests,
	fault.KindUnprocessable: http.StatusUnprocessableEntity,
}

// fromFault is the answer to a domain error: its kind's status, its message, fields and data, and
// Retry-After in whole seconds (at least 1) when it asks for a wait.
func fromFault(fe *fault.Error) *Error {
	status, ok := faultStatus[fe.Kind]
	if !ok {
		status = http.StatusInternalServerError
	}
	out := wrap(status, fe.Message, fe)
	out.Errors = fe.Fields
	out.Data = fe.Data
	if fe.RetryAfter > 0 {
		out.WithHeader("Retry-After", strconv.FormatInt(max(1, int64(math.Ceil(fe.RetryAfter.Seconds()))), 10))
	}
	return out
}

// isConnectionError recognises a dependency that is down or restarting (the control database,
// Redis): such a request is a 503, never a 500.
func isConnectionError(err error) bool {
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, net.ErrClosed),
		errors.As(err, &oe), errors.As(err, &ne):
		return true
	}
	// PostgreSQL's own "shutting down / starting up" and connection-exception SQLSTATEs.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		c := pgErr.Code
		return c == "57P01" || c == "57P02" || c == "57P03" || strings.HasPrefix(c, "08")
	}
	return false
}

// isConcurrencyFailure recognises PostgreSQL breaking a transaction off because of a concurrent
// one (deadlock_detected, serialization_failure, lock_not_available): nothing was written, and the
// same request again succeeds, so it is a 503 with Retry-After, not a 500.
func isConcurrencyFailure(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "40P01" || pgErr.Code == "40001" || pgErr.Code == "55P03"
	}
	return false
}

// Invalid is one invalid body field found by an input's Resolve method (a huma.Resolver): a check
// the JSON schema cannot express (a common password, a time in the past). huma runs resolvers
// after the schema check even when it failed, so one 400 lists every invalid field, schema's and
// these alike. field is the body member ("password", "items[2].name").
func Invalid(field, message string) error {
	return &huma.ErrorDetail{Location: "body." + field, Message: message}
}

// WithArticle puts "a" or "an" before word, as its first sound asks: "an Active", "a Failed".
// For the statuses and names that messages quote.
func WithArticle(word string) string {
	w := strings.ToLower(word)
	switch {
	case w == "":
		return word
	case strings.HasPrefix(w, "uni"), strings.HasPrefix(w, "use"), strings.HasPrefix(w, "usu"):
		return "a " + word // "a user": the u sounds like "you"
	case strings.ContainsRune("aeiou", rune(w[0])):
		return "an " + word
	}
	return "a " + word
}
