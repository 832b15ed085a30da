package httpx

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"
	"github.com/gofiber/fiber/v2"
	"go.uber.org/fx"
)

// Access says who may call an operation. The guard attaches the matching check, and the OpenAPI
// document declares the matching security requirement, from this one value.
type Access string

const (
	// Public operations need no credentials.
	Public Access = "public"
	// Authenticated operations need a valid Bearer JWT.
	Authenticated Access = "user"
	// AdminOnly operations need a valid Bearer JWT of a user whose current role is Admin.
	AdminOnly Access = "admin"
	// APIKey operations authenticate with an AI API key; the owning module attaches its own check.
	APIKey Access = "apiKey"
)

// UserLimitKey is the operation metadata naming a rate limit counted per caller after
// authentication (PerUserLimit); the guard counts it.
const UserLimitKey = "userLimit"

// PerUserLimit is the metadata of an operation that also counts the named rate limit (a
// RateLimit:* key) per signed-in caller: past it, a 429 with Retry-After and the rate-limit headers.
// RateLimit:Provision marks the state-changing operations of the provisioning modules.
func PerUserLimit(name string) map[string]any { return map[string]any{UserLimitKey: name} }

// Security scheme names in the OpenAPI document.
const (
	SchemeBearer = "bearerAuth"
	SchemeAPIKey = "apiKeyAuth"
	// SchemeAIKeyBearer is the AI key sent as a Bearer token (what OpenAI SDKs send): the
	// OpenAI-compatible pass-through takes it, and refuses a JWT.
	SchemeAIKeyBearer = "aiKeyBearer"
)

// Guard authenticates requests for the operations that need it. The auth platform provides it.
type Guard interface {
	// Middleware returns the huma middleware enforcing access for operations on api.
	Middleware(api huma.API, access Access) func(ctx huma.Context, next func(huma.Context))
}

// Routes is implemented by every module that serves HTTP operations.
type Routes interface {
	// Register adds the module's operations to api. Called once at startup.
	Register(api *API)
}

// API is the one huma API of the service, with the guard that protects its operations.
type API struct {
	huma.API
	guard Guard
	// idempotency serves the operations marked Idempotent; nil leaves them unguarded (tests of httpx).
	idempotency Idempotency
	app         *fiber.App
	// errorWriters answer the errors under a path prefix in a format of their own.
	errorWriters []errorWriter
}

// ErrorWriter writes an error response in a format other than the envelope.
type ErrorWriter func(c *fiber.Ctx, e *Error) error

type errorWriter struct {
	prefix string
	write  ErrorWriter
}

// WriteErrorsUnder makes every error the server answers under the path prefix (no route, method
// not allowed, body too large, the per-IP limit, a panic) go through w instead of the envelope:
// for routes that speak another API's format (the OpenAI-compatible pass-through). Call it from
// Register, before the server starts; the prefix is matched case-sensitively, as routes are.
func (a *API) WriteErrorsUnder(prefix string, w ErrorWriter) {
	a.errorWriters = append(a.errorWriters, errorWriter{prefix: prefix, write: w})
}

// errorWriterFor returns the writer registered for path, or nil.
func (a *API) errorWriterFor(path string) ErrorWriter {
	for _, w := range a.errorWriters {
		if strings.HasPrefix(path, w.prefix) {
			return w.write
		}
	}
	return nil
}

// Fiber returns the underlying app, for the rare route huma cannot serve (a streamed
// pass-through); such a route must add its operation to the OpenAPI document itself.
func (a *API) Fiber() *fiber.App { return a.app }

// Register adds one operation. access decides the security requirement, the guard middleware and
// the documented error responses; handlers return errors and never write error bodies themselves.
func Register[I, O any](a *API, access Access, op huma.Operation, h func(context.Context, *I) (*O, error)) {
	if op.Metadata == nil {
		op.Metadata = map[string]any{}
	}
	op.Metadata["access"] = access
	if t, ok := bodyType(reflect.TypeFor[I]()); ok {
		// For the errors about a number beyond a field's range: they name the field's own range.
		op.Metadata[bodyTypeKey] = t
	}
	errs := append([]int{}, op.Errors...)
	switch access {
	case Authenticated, AdminOnly:
		op.Security = []map[string][]string{{SchemeBearer: {}}}
		errs = append(errs, http.StatusUnauthorized)
		if access == AdminOnly {
			errs = append(errs, http.StatusForbidden)
			if op.Extensions == nil {
				op.Extensions = map[string]any{}
			}
			op.Extensions["x-required-role"] = "Admin"
		}
		if a.guard != nil {
			op.Middlewares = append(huma.Middlewares{a.guard.Middleware(a.API, access)}, op.Middlewares...)
		}
	case APIKey:
		if op.Security == nil {
			op.Security = []map[string][]string{{SchemeAPIKey: {}}}
		}
		errs = append(errs, http.StatusUnauthorized)
	}
	// Every operation may meet a dependency that is down (the control database, an engine): 503;
	// and a rate limit (429), but for the probes no limit counts.
	if !Probe(op.Path) {
		errs = append(errs, http.StatusTooManyRequests)
	}
	errs = append(errs, http.StatusInternalServerError, http.StatusServiceUnavailable)
	// 400, 413 and 415: documentBadRequest, for every operation.
	if hidden := hiddenEmbedded(reflect.TypeFor[I](), map[reflect.Type]bool{}); hidden != "" {
		panic(fmt.Sprintf("httpx: %s %s: %s", op.Method, op.Path, hidden))
	}
	if names := integerPathParams(reflect.TypeFor[I]()); len(names) > 0 {
		op.Middlewares = append(op.Middlewares, canonicalIntegers(a.API, names))
	}
	if names := scalarQueryParams(reflect.TypeFor[I]()); len(names) > 0 {
		op.Middlewares = append(op.Middlewares, singleQueryValues(a.API, names))
	}
	// Last: a request the checks above refuse takes no key.
	if IsIdempotent(&op) && a.idempotency != nil {
		op.Middlewares = append(op.Middlewares, a.idempotency.Middleware(a.API))
	}
	// huma adds this operation's own responses (its 2xx, its errors) to op.Responses: a map a
	// module shares between operations (one 502 documented for a create and a delete) would give
	// the delete the create's 201. Each operation gets its own copy.
	if op.Responses != nil {
		own := make(map[string]*huma.Response, len(op.Responses))
		for code, r := range op.Responses {
			c := *r
			own[code] = &c
		}
		op.Responses = own
	}
	if IsIdempotent(&op) {
		documentIdempotency(&op)
		errs = append(errs, http.StatusConflict, http.StatusUnprocessableEntity)
	}
	op.Errors = uniqueInts(errs)
	// huma replaces the response of every error status with a generic one: keep the description
	// and headers (say a 502's Retry-After) the caller documented for it.
	given := map[string]*huma.Response{}
	for code, r := range op.Responses {
		given[code] = r
	}
	huma.Register(a.API, op, withFaultHeaders(h))
	if doc := operationOf(a.OpenAPI(), op.Method, op.Path); doc != nil {
		if r := doc.Responses["401"]; r != nil && (access == Authenticated || access == AdminOnly) {
			r.Headers = map[string]*huma.Param{"WWW-Authenticate": {
				Description: "`Bearer` without a token; `Bearer error=\"invalid_token\"` for a malformed, expired or revoked one.",
				Schema:      &huma.Schema{Type: "string"}}}
		}
		// Every 429 carries Retry-After (the limiter's, or the AI upstream's relayed): a generated
		// client reads it only when the response documents it.
		if r := doc.Responses["429"]; r != nil && r.Headers["Retry-After"] == nil {
			if r.Headers == nil {
				r.Headers = map[string]*huma.Param{}
			}
			r.Headers["Retry-After"] = &huma.Param{Description: "Seconds until the limit reached lets a request through.", Required: true,
				Schema: &huma.Schema{Type: "integer"}}
		}
		// A 503 of a transaction a concurrent change got in the way of (FromError), or of a request
		// past the databases' engine-wait bound, says when to try again; one of a dependency that is
		// down does not know.
		if r := doc.Responses["503"]; r != nil && r.Headers["Retry-After"] == nil && !Probe(op.Path) {
			if r.Headers == nil {
				r.Headers = map[string]*huma.Param{}
			}
			r.Headers["Retry-After"] = &huma.Param{Description: "Seconds after which the request, which changed nothing, may be sent again " +
				"(a concurrent change, or too many engine waits); absent when a dependency is unavailable.",
				Schema: &huma.Schema{Type: "integer"}}
		}
		for code, r := range given {
			got := doc.Responses[code]
			if got == nil || got == r {
				continue
			}
			if r.Description != "" {
				got.Description = r.Description
			}
			if r.Headers != nil {
				got.Headers = r.Headers
			}
		}
	}
}

// operationOf returns the documented operation of method on path, or nil.
func operationOf(doc *huma.OpenAPI, method, path string) *huma.Operation {
	item := doc.Paths[path]
	if item == nil {
		return nil
	}
	switch method {
	case http.MethodGet:
		return item.Get
	case http.MethodPost:
		return item.Post
	case http.MethodPut:
		return item.Put
	case http.MethodPatch:
		return item.Patch
	case http.MethodDelete:
		return item.Delete
	}
	return nil
}

// AccessOf reports the access level an operation was registered with.
func AccessOf(op *huma.Operation) Access {
	if op == nil || op.Metadata == nil {
		return Public
	}
	if a, ok := op.Metadata["access"].(Access); ok {
		return a
	}
	return Public
}

func uniqueInts(in []int) []int {
	seen := map[int]bool{}
	out := in[:0]
	for _, v := range in {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// newAPI builds the huma API on app with our envelope for every error.
func newAPI(app *fiber.App, title, version string, guard Guard, idempotency Idempotency) *API {
	cfg := huma.DefaultConfig(title, version)
	// Schema names must match ^[a-zA-Z0-9._-]+$ (OpenAPI); huma's namer keeps e.g. "struct {}".
	cfg.Components.Schemas = huma.NewMapRegistry("#/components/schemas/", schemaNamer)
	cfg.Info.Contact = &huma.Contact{Name: "Platform team", URL: "https://example.com/provisioner"}
	cfg.Info.License = &huma.License{Name: "Proprietary"}
	cfg.OpenAPIPath = "" // served by serveDocument
	cfg.DocsPath = ""
	cfg.SchemasPath = ""
	cfg.CreateHooks = nil // no $schema fields or Link headers in responses
	// Request bodies are decoded strictly (exact member names, no duplicates, UTF-8, no NUL): see
	// requestJSON. A fresh map: huma.DefaultFormats is shared by every API of the process.
	cfg.Formats = map[string]huma.Format{"application/json": requestJSON, "json": requestJSON}
	cfg.Info.Description = "Resource provisioning service: sign up, then provision PostgreSQL/MySQL " +
		"databases, DNS records, workflow-automation accounts and AI API keys. Every response is the " +
		"envelope `{success, message, data}` (`success` true when the request succeeded, `message` a human-readable outcome); " +
		"errors add `errors` for validation failures.\n\n" +
		"Rate limits: every response but the probes' carries `X-RateLimit-Limit`, `X-RateLimit-Remaining`, " +
		"`X-RateLimit-Reset` (seconds) and the IETF draft's `RateLimit-Policy`/`RateLimit` for the tightest limit that applied " +
		"(required on a success, optional on an error); a 429 adds `Retry-After`. Limits are shared by every instance. " +
		"The state-changing routes of databases, DNS, workflow automation and AI keys also count `RateLimit:Provision` per user.\n\n" +
		"HTTP: paths are case-sensitive; a numeric path id is canonical decimal and a query parameter is given once " +
		"(else a 400); a method a path does not serve is a 405 with `Allow`; every GET also answers HEAD. Request bodies are " +
		"uncompressed UTF-8 JSON (else a 415, on every route). Every answer carries `Cache-Control: no-store`, " +
		"`X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`; a 401 of a Bearer operation carries " +
		"`WWW-Authenticate`; the X-API-Key operations and `POST /api/auth/login` send none.\n\n" +
		"Consistency: once a change is answered, every later request sees it, whichever instance serves it."
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		SchemeBearer: {Type: "http", Scheme: "bearer", BearerFormat: "JWT",
			Description: "Access token from /api/auth/login, /api/auth/register or the OAuth callback."},
		SchemeAPIKey: {Type: "apiKey", In: "header", Name: "X-API-Key",
			Description: "AI API key from POST /api/me/ai-keys."},
		SchemeAIKeyBearer: {Type: "http", Scheme: "bearer",
			Description: "AI API key from POST /api/me/ai-keys as the Bearer token (`Authorization: Bearer sk-prov-…`, what OpenAI SDKs send). Not a JWT: an access token is refused."},
	}
	return &API{API: humafiber.NewWithGroup(app, headToo{app}, cfg), guard: guard, idempotency: idempotency, app: app}
}

// headToo registers every GET operation of huma for HEAD as well, as Fiber's own app.Get does
// (RFC 9110: HEAD wherever GET): same handler, status and headers, and fasthttp sends no body.
// The OpenAPI document lists only the GET.
type headToo struct{ fiber.Router }

func (r headToo) Add(method, path string, handlers ...fiber.Handler) fiber.Router {
	if method == http.MethodGet {
		r.Router.Add(http.MethodHead, path, handlers...)
	}
	return r.Router.Add(method, path, handlers...)
}

// AsRoutes provides a module's Routes to the server.
func AsRoutes(f any) any {
	return fx.Annotate(f, fx.As(new(Routes)), fx.ResultTags(`group:"routes"`))
}

// Meta merges operation metadata: Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()).
func Meta(parts ...map[string]any) map[string]any {
	out := map[string]any{}
	for _, p := range parts {
		for k, v := range p {
			out[k] = v
		}
	}
	return out
}
