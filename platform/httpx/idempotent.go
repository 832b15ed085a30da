package httpx

import "github.com/danielgtaylor/huma/v2"

// The headers of idempotent requests (Stripe's semantics, see Idempotency).
const (
	// IdempotencyKeyHeader is the request header naming a request so that a retry is safe.
	IdempotencyKeyHeader = "Idempotency-Key"
	// ReplayedHeader is "true" on an answer given again to a retry.
	ReplayedHeader = "Idempotent-Replayed"
	// MaxIdempotencyKey is the longest Idempotency-Key accepted, in bytes.
	MaxIdempotencyKey = 255
)

// idempotentKey is the Metadata key marking an operation Idempotent.
const idempotentKey = "idempotent"

// Idempotent is the Metadata of an operation that takes an Idempotency-Key (a POST that creates
// or changes a resource): `Metadata: httpx.Idempotent(),` in its huma.Operation. Register then
// documents the header, the 409 and the 422, and puts the server's Idempotency in front of the
// handler (after the guard: keys are kept per user).
func Idempotent() map[string]any { return map[string]any{idempotentKey: true} }

// Idempotency keeps the first answer to each Idempotency-Key and gives it again to a retry. The
// idempotency platform provides it.
type Idempotency interface {
	// Middleware returns the huma middleware doing so for the operations of api marked Idempotent.
	Middleware(api huma.API) func(ctx huma.Context, next func(huma.Context))
}

// idempotencyKeyDoc describes the header once: every operation taking it refers to one shared
// parameter (shareComponents).
const idempotencyKeyDoc = "Makes a retry safe (Stripe's semantics): the first answer to a key is kept 24 hours per user and " +
	"operation; a retry with the same key, path and body gets that answer again, with `" + ReplayedHeader + ": true`, " +
	"and changes nothing. The same key with another path or body: 422; while the first request is still being answered: " +
	"409 (retry later). Answers refused before the operation ran (400, 401, 403, 429, 503) are not kept. " +
	"1 to 255 printable ASCII characters, e.g. a UUID."

// idempotencyMismatchDoc describes the 422 of every idempotent operation.
const idempotencyMismatchDoc = "The `Idempotency-Key` was already used with another request (path or body): use a new key."

// documentIdempotency adds the header and the 422 to op, whose responses are its own; Register adds
// 409 and 422 to its errors.
func documentIdempotency(op *huma.Operation) {
	op.Parameters = append(append([]*huma.Param{}, op.Parameters...), &huma.Param{Name: IdempotencyKeyHeader, In: "header", Description: idempotencyKeyDoc,
		Schema: &huma.Schema{Type: "string", MinLength: ptr(1), MaxLength: ptr(MaxIdempotencyKey), Pattern: "^[ -~]+$"}})
	if op.Responses == nil {
		op.Responses = map[string]*huma.Response{}
	}
	op.Responses["422"] = &huma.Response{Description: idempotencyMismatchDoc}
}

// IsIdempotent reports whether op was registered as Idempotent.
func IsIdempotent(op *huma.Operation) bool {
	return op != nil && op.Metadata != nil && op.Metadata[idempotentKey] == true
}
