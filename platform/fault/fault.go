// Package fault is the domain errors services and provisioners return: a Kind (not found,
// conflict, invalid, …), the message a client may read, and optionally the invalid fields, data
// (the resource as it stands) and a time to retry after. It knows nothing of HTTP: the one mapper
// in platform/httpx turns a Kind into a status. Services never import httpx.
package fault

import (
	"errors"
	"fmt"
	"time"
)

// Kind is the category of a domain error.
type Kind int

// The kinds, each with the answer httpx gives it.
const (
	KindNotFound      Kind = iota + 1 // 404: an unknown resource, or another user's
	KindConflict                      // 409: duplicate, quota reached, illegal state change
	KindInvalid                       // 400: well-formed but not acceptable; Fields name what
	KindUnauthorized                  // 401
	KindForbidden                     // 403
	KindUpstream                      // 502: an external provider failed; Data is the resource as stored
	KindUnavailable                   // 503: a dependency needed for this request is down or busy
	KindTooMany                       // 429: a limit of ours refused the request
	KindUnprocessable                 // 422: the request contradicts an earlier one (an idempotency key reused)
)

// Sentinels matched with errors.Is; every *Error of a kind matches its kind's sentinel.
var (
	ErrNotFound      = errors.New("not found")
	ErrConflict      = errors.New("conflict")
	ErrInvalid       = errors.New("invalid request")
	ErrUnauthorized  = errors.New("unauthorized")
	ErrForbidden     = errors.New("forbidden")
	ErrUpstream      = errors.New("upstream provider failed")
	ErrUnavailable   = errors.New("service unavailable")
	ErrTooMany       = errors.New("too many requests")
	ErrUnprocessable = errors.New("unprocessable request")
)

var sentinels = map[Kind]error{
	KindNotFound: ErrNotFound, KindConflict: ErrConflict, KindInvalid: ErrInvalid,
	KindUnauthorized: ErrUnauthorized, KindForbidden: ErrForbidden, KindUpstream: ErrUpstream,
	KindUnavailable: ErrUnavailable, KindTooMany: ErrTooMany, KindUnprocessable: ErrUnprocessable,
}

// FieldError names one invalid field of a request.
type FieldError struct {
	Field   string `json:"field" example:"email"`
	Message string `json:"message" example:"must be a valid email address"`
}

// Error is a domain error. Message is shown to the client as is; Cause is only logged.
type Error struct {
	Kind    Kind
	Message string
	Fields  []FieldError
	// Data travels in the answer's envelope (e.g. the resource as stored when a provider failed).
	Data any
	// RetryAfter, when positive, tells the client when to try again.
	RetryAfter time.Duration
	Cause      error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %v", e.Message, e.Cause)
	}
	return e.Message
}

// Unwrap returns the cause and the kind's sentinel, so errors.Is(err, ErrConflict) holds.
func (e *Error) Unwrap() []error {
	out := []error{sentinels[e.Kind]}
	if e.Cause != nil {
		out = append(out, e.Cause)
	}
	return out
}

// WithData returns e carrying data in the answer.
func (e *Error) WithData(data any) *Error { e.Data = data; return e }

// WithRetryAfter returns e asking the client to wait d before trying again.
func (e *Error) WithRetryAfter(d time.Duration) *Error { e.RetryAfter = d; return e }

// WithCause returns e wrapping cause (logged, never shown).
func (e *Error) WithCause(cause error) *Error { e.Cause = cause; return e }

// New is an error of kind with message.
func New(kind Kind, message string) *Error { return &Error{Kind: kind, Message: message} }

// NotFound is a KindNotFound error.
func NotFound(message string) *Error { return New(KindNotFound, message) }

// Conflict is a KindConflict error.
func Conflict(message string) *Error { return New(KindConflict, message) }

// Invalid is a KindInvalid error listing the invalid fields.
func Invalid(message string, fields ...FieldError) *Error {
	return &Error{Kind: KindInvalid, Message: message, Fields: fields}
}

// InvalidField is the usual one-field validation failure ("Validation failed").
func InvalidField(field, message string) *Error {
	return Invalid("Validation failed", FieldError{Field: field, Message: message})
}

// Unauthorized is a KindUnauthorized error.
func Unauthorized(message string) *Error { return New(KindUnauthorized, message) }

// Forbidden is a KindForbidden error.
func Forbidden(message string) *Error { return New(KindForbidden, message) }

// Upstream is a KindUpstream error carrying the resource as stored.
func Upstream(message string, data any) *Error {
	return &Error{Kind: KindUpstream, Message: message, Data: data}
}

// Unavailable is a KindUnavailable error.
func Unavailable(message string) *Error { return New(KindUnavailable, message) }

// TooMany is a KindTooMany error asking the client to wait retryAfter.
func TooMany(message string, retryAfter time.Duration) *Error {
	return &Error{Kind: KindTooMany, Message: message, RetryAfter: retryAfter}
}

// Unprocessable is a KindUnprocessable error.
func Unprocessable(message string) *Error { return New(KindUnprocessable, message) }

// As returns the first *Error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
