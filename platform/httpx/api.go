package httpx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/big"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"
	"github.com/gofiber/fiber/v2"
	"go.uber.org/fx"

	"provisioner/platform/fault"
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
	app   *fiber.App
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
	op.Errors = uniqueInts(errs)
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
			r.Headers["Retry-After"] = &huma.Param{Description: "Seconds until the limit that was reached lets a request " +
				"through again; always sent with a 429 (with `X-RateLimit-*` naming the limit).", Required: true,
				Schema: &huma.Schema{Type: "integer"}}
		}
		// A 503 of a transaction a concurrent change got in the way of (FromError), or of a request
		// past the databases' engine-wait bound, says when to try again; one of a dependency that is
		// down does not know.
		if r := doc.Responses["503"]; r != nil && r.Headers["Retry-After"] == nil && !Probe(op.Path) {
			if r.Headers == nil {
				r.Headers = map[string]*huma.Param{}
			}
			r.Headers["Retry-After"] = &huma.Param{Description: "Sent when the request, which changed nothing, may simply be " +
				"sent again after that many seconds: `1` when a concurrent change got in the way of it; on the operations of " +
				"tenant databases and their credentials also when too many requests already wait for the engines; absent " +
				"when a dependency is unavailable.",
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

// integerPathParams names the integer path parameters of an input type (embedded structs included).
func integerPathParams(t reflect.Type) []string {
	return taggedFields(t, func(f reflect.StructField) string {
		if f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Uint64 {
			return f.Tag.Get("path")
		}
		return ""
	})
}

// taggedFields names, in order, the fields of struct t (embedded structs included) for which name
// answers a name.
func taggedFields(t reflect.Type, name func(reflect.StructField) string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			out = append(out, taggedFields(f.Type, name)...)
			continue
		}
		if n := name(f); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// scalarQueryParams names the query parameters of an input type that take one value (any but a
// slice), embedded structs included.
func scalarQueryParams(t reflect.Type) []string {
	return taggedFields(t, func(f reflect.StructField) string {
		if name, _, _ := strings.Cut(f.Tag.Get("query"), ","); f.Type.Kind() != reflect.Slice {
			return name
		}
		return ""
	})
}

// singleQueryValues refuses (400) a request giving a one-value query parameter more than once
// (?status=Active&status=Failed): huma would take the first and drop the rest without a word, and
// the client would believe it had filtered on both.
func singleQueryValues(api huma.API, names []string) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		if args := humafiber.Unwrap(ctx).Context().QueryArgs(); args.Len() > 1 {
			for _, n := range names {
				if vs := args.PeekMulti(n); len(vs) > 1 {
					_ = huma.WriteErr(api, ctx, http.StatusUnprocessableEntity, "validation failed",
						&huma.ErrorDetail{Location: "query." + n, Message: fmt.Sprintf("must be given once (it was given %d times)", len(vs))})
					return
				}
			}
		}
		next(ctx)
	}
}

// hiddenEmbedded names a struct embedded without a json tag whose type is unexported, anywhere in
// t: encoding/json decodes its members, but huma neither documents nor validates them (its schema
// skips unexported fields), so the body would be served unchecked under a schema that omits them.
// Such an input is a programming error, refused when the route is registered.
func hiddenEmbedded(t reflect.Type, seen map[reflect.Type]bool) string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return ""
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && !f.IsExported() && ft.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
			return fmt.Sprintf("%s embeds the unexported %s, whose members huma neither documents nor validates: export it", t, ft)
		}
		if f.IsExported() || f.Anonymous {
			if hidden := hiddenEmbedded(f.Type, seen); hidden != "" {
				return hidden
			}
		}
	}
	return ""
}

// canonicalIntegers refuses an integer path parameter not written in canonical decimal: huma
// would parse /api/users/01 and /api/users/+1 as user 1, so one resource had many URLs. Such a
// value is answered as a non-numeric one is: 400, field "id", "invalid integer".
func canonicalIntegers(api huma.API, names []string) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		for _, n := range names {
			if v := ctx.Param(n); !canonicalDecimal(v) {
				_ = huma.WriteErr(api, ctx, http.StatusUnprocessableEntity, "validation failed",
					&huma.ErrorDetail{Location: "path." + n, Message: "invalid integer", Value: v})
				return
			}
		}
		next(ctx)
	}
}

// canonicalDecimal reports whether s is a non-negative integer in canonical decimal: digits only,
// no sign, no leading zero (except "0" itself).
func canonicalDecimal(s string) bool {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
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
func newAPI(app *fiber.App, title, version string, guard Guard) *API {
	cfg := huma.DefaultConfig(title, version)
	// Schema names must match ^[a-zA-Z0-9._-]+$ (OpenAPI); huma's namer keeps e.g. "struct {}".
	cfg.Components.Schemas = huma.NewMapRegistry("#/components/schemas/", schemaNamer)
	cfg.Info.Contact = &huma.Contact{Name: "Platform team", URL: "https://example.com/provisioner"}
	cfg.Info.License = &huma.License{Name: "Proprietary"}
	cfg.OpenAPIPath = "/api/openapi"
	cfg.DocsPath = ""
	cfg.SchemasPath = ""
	cfg.CreateHooks = nil // no $schema fields or Link headers in responses
	// Request bodies are decoded strictly (exact member names, no duplicates, UTF-8, no NUL): see
	// requestJSON. A fresh map: huma.DefaultFormats is shared by every API of the process.
	cfg.Formats = map[string]huma.Format{"application/json": requestJSON, "json": requestJSON}
	cfg.Info.Description = "Resource provisioning service: sign up, then provision PostgreSQL/MySQL " +
		"databases, DNS records, workflow-automation accounts and AI API keys. Every response is the " +
		"envelope `{success, message, data}`; errors add `errors` for validation failures.\n\n" +
		"Rate limits: every response but the probes' carries `X-RateLimit-Limit`, `X-RateLimit-Remaining`, " +
		"`X-RateLimit-Reset` (seconds until the window resets, at most its length) and the IETF draft's `RateLimit-Policy`/`RateLimit` for the " +
		"tightest limit that applied (declared on each response: required on a success, optional on an error, which may be " +
		"refused before any limit counted); a 429 adds `Retry-After`. Limits are shared by every instance of " +
		"the service; for the per-IP and per-user limits, `Remaining` counts hits another instance " +
		"has reserved as spent.\n\n" +
		"HTTP: paths are case-sensitive and a numeric path id is canonical decimal (`01`, `+1` are a 400, as `abc` is); " +
		"a query parameter is given once (repeated, it is a 400 naming it); " +
		"a method a path does not serve is a 405 whose `Allow` lists those it does (not listed under each operation, which never answers it); " +
		"every GET route also answers HEAD; `Content-Type` is matched case-insensitively. Request bodies are taken " +
		"uncompressed only: a body with a `Content-Encoding` other than `identity` (gzip, deflate, br) is a 415 on every route, " +
		"before anything reads it, and so is a body whose `Content-Type` declares a `charset` other than `utf-8` (bodies are read as UTF-8, RFC 8259). Every answer carries " +
		"`Cache-Control: no-store`, `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`; a 401 of a " +
		"Bearer operation carries `WWW-Authenticate`; the X-API-Key operations and `POST /api/auth/login` send none: neither an API " +
		"key nor a password in the body is an HTTP authentication scheme, so no challenge applies.\n\n" +
		"Consistency: once a request that changed something has been answered, every later request " +
		"sees the change, whichever instance serves it (a revoked key or a demoted role is refused at once)."
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		SchemeBearer: {Type: "http", Scheme: "bearer", BearerFormat: "JWT",
			Description: "Access token from /api/auth/login, /api/auth/register or the OAuth callback."},
		SchemeAPIKey: {Type: "apiKey", In: "header", Name: "X-API-Key",
			Description: "AI API key from POST /api/me/ai-keys."},
		SchemeAIKeyBearer: {Type: "http", Scheme: "bearer",
			Description: "AI API key from POST /api/me/ai-keys as the Bearer token (`Authorization: Bearer sk-prov-…`, what OpenAI SDKs send). Not a JWT: an access token is refused."},
	}
	return &API{API: humafiber.NewWithGroup(app, headToo{app}, cfg), guard: guard, app: app}
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

func init() {
	// The schema check must read the members the decoder fills (requestJSON matches names exactly):
	// by default huma's validator takes a case variant ("EMAIL") for a missing property, which the
	// struct never receives.
	huma.ValidateStrictCasing = true
	huma.NewErrorWithContext = func(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
		return mapHumaError(hctx, status, msg, errs...)
	}
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		return mapHumaError(nil, status, msg, errs...)
	}
}

// patternRefusal reports whether a huma message refuses a value its schema's pattern or enum does
// not allow (a Resolve check of the same field, when there is one, says better what is wrong):
// "expected value to be one of …", "expected string to match pattern …", or "expected string to be <patternDescription>",
// which the formats' messages, "expected string to be RFC 5322 email" and the like, are not), and
// answers the message in our words ("must be <patternDescription>").
func patternRefusal(m string) (string, bool) {
	if strings.HasPrefix(m, "expected string to match pattern ") || strings.HasPrefix(m, "expected value to be one of ") {
		return m, true
	}
	desc, ok := strings.CutPrefix(m, "expected string to be ")
	if !ok || strings.HasPrefix(desc, "RFC ") || strings.HasPrefix(desc, "either RFC ") || strings.HasPrefix(desc, "regex: ") || desc == "base64 encoded" {
		return m, false
	}
	return "must be " + desc, true
}

// withFaultHeaders maps a domain error h returns to its Error before huma sees it: huma writes the
// headers of the error a handler returned (a fault's Retry-After) only when that error carries
// them itself, not those of the error it maps the handler's error to.
func withFaultHeaders[I, O any](h func(context.Context, *I) (*O, error)) func(context.Context, *I) (*O, error) {
	return func(ctx context.Context, in *I) (*O, error) {
		out, err := h(ctx, in)
		if _, ok := fault.As(err); ok {
			var e *Error
			if !errors.As(err, &e) {
				return out, FromError(err)
			}
		}
		return out, err
	}
}

// mapHumaError turns huma's own errors (validation, unmarshal, body size) and errors returned by
// handlers into our Error: validation is 400 with every field, internals never reach the client.
func mapHumaError(hctx huma.Context, status int, msg string, errs ...error) huma.StatusError {
	if status == 0 { // schema generation asks for an example error
		return &Error{}
	}
	if status >= 500 && len(errs) == 1 {
		// A handler returned a plain error: map sentinels, log the rest with the request id.
		out := FromError(errs[0])
		if out.Status >= 500 && hctx != nil {
			slog.ErrorContext(hctx.Context(), "request failed",
				"requestId", requestIDFrom(hctx), "error", errs[0].Error())
		}
		return out
	}
	var fields []FieldError
	byPattern := map[string]bool{} // fields whose entry is the schema's pattern refusing them
	addFrom := func(field, message string, pattern bool) {
		i := slices.IndexFunc(fields, func(f FieldError) bool { return f.Field == field })
		switch {
		case i < 0:
			fields = append(fields, FieldError{Field: field, Message: message})
			byPattern[field] = pattern
		case byPattern[field] && !pattern:
			// The schema's pattern only says the value does not match; a Resolve check of the
			// same field says what is wrong (blank, the control character it holds).
			fields[i].Message, byPattern[field] = message, false
		}
		// Otherwise one entry per field: the schema's comes first; a Resolve check of the same
		// field (a common password that is also too short) adds nothing.
	}
	add := func(field, message string) { addFrom(field, message, false) }
	// A number beyond the Go type's range says what the type holds, not what the field accepts:
	// listed only for a field nothing else names (a Resolve check of the field says its own range).
	var beyondType []FieldError
	for _, err := range errs {
		var d *huma.ErrorDetail
		if errors.As(err, &d) {
			field, message := fieldName(d.Location), integralLimits(d.Message)
			pattern := false
			if m, ok := patternRefusal(message); ok {
				message, pattern = m, true
			}
			if field == "body" {
				if f, m, ok := memberMessage(d.Message); ok {
					if beyondTypeRange(m) {
						beyondType = append(beyondType, FieldError{Field: f, Message: m})
						continue
					}
					field, message = f, m
				}
			}
			if m := requiredProperty.FindStringSubmatch(d.Message); m != nil {
				// "expected required property email to be present" at "body": name the field itself.
				if field == "body" || field == "" {
					field = m[1]
				} else {
					field += "." + m[1]
				}
				message = "is required"
			}
			addFrom(field, message, pattern)
			continue
		}
		if err != nil && status < 500 {
			// The decoder's error for one member (5.5 or 1e30 in an integer field) goes under it.
			f, m, ok := memberMessage(err.Error())
			switch {
			case ok && beyondTypeRange(m):
				beyondType = append(beyondType, FieldError{Field: f, Message: m})
			case ok:
				add(f, m)
			default:
				add("body", err.Error())
			}
		}
	}
	for _, f := range beyondType {
		if r := documentedRange(hctx, f.Field); r != "" {
			f.Message = r
		}
		add(f.Field, f.Message)
	}
	switch status {
	case http.StatusUnprocessableEntity:
		status = http.StatusBadRequest
		msg = "Validation failed"
	case http.StatusBadRequest:
		if msg == "request body is required" { // huma's, for a required body that is empty
			msg = "Request body is required"
			fields = []FieldError{{Field: "body", Message: "is required"}}
		} else if strings.Contains(strings.ToLower(msg), "unmarshal") || strings.Contains(strings.ToLower(msg), "json") {
			msg = "Malformed JSON body"
		} else if msg == "" || len(fields) > 0 {
			msg = "Validation failed"
		}
	case http.StatusRequestEntityTooLarge:
		msg = "Request body is larger than 1 MiB"
	case http.StatusUnsupportedMediaType:
		msg = "Unsupported Content-Type: send application/json"
		fields = nil
	}
	if status == http.StatusInternalServerError {
		return NewError(http.StatusInternalServerError, "An unexpected error occurred")
	}
	e := NewError(status, msg)
	e.Errors = fields
	return e
}

// schemaNamer is huma's default namer with the module's name kept for types of modules (two
// modules may both have a View), and only characters OpenAPI allows.
func schemaNamer(t reflect.Type, hint string) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := t.Name()
	if name == "" {
		return invalidSchemaChars.ReplaceAllString(huma.DefaultSchemaNamer(t, hint), "")
	}
	if t.PkgPath() != "" && !strings.Contains(name, "[") {
		name = t.PkgPath() + "." + name
	}
	name = strings.ReplaceAll(name, "[]", "List[")
	var b strings.Builder
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '[' || r == ']' || r == '*' || r == ',' }) {
		dot := strings.LastIndex(part, ".")
		base := part[dot+1:]
		if dot > 0 && strings.Contains(part[:dot], "/modules/") {
			mod := part[strings.LastIndex(part[:dot], "/")+1 : dot]
			if !strings.HasPrefix(strings.ToLower(base), mod) {
				base = mod + upperFirst(base)
			}
		}
		b.WriteString(upperFirst(base))
	}
	return invalidSchemaChars.ReplaceAllString(b.String(), "")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

var invalidSchemaChars = regexp.MustCompile(`[^a-zA-Z0-9._-]`)

// exponentNumber is a number huma formatted with %v: a float64 of 1 MiB prints as 1.048576e+06.
var exponentNumber = regexp.MustCompile(`-?[0-9]+(?:\.[0-9]+)?e[+-][0-9]+`)

// integralLimits writes the whole numbers of a validation message as integers ("expected number >=
// 1048576", not 1.048576e+06); other numbers are left as they are.
func integralLimits(msg string) string {
	return exponentNumber.ReplaceAllStringFunc(msg, func(n string) string {
		f, err := strconv.ParseFloat(n, 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) >= 1e21 {
			return n
		}
		return strconv.FormatFloat(f, 'f', -1, 64)
	})
}

// memberMessage splits a decoding error about one member, as decodeError words it ("\"ttl\" must
// be an integer"), into the field and what is wrong with it. huma keeps only the text of the
// errors of its validation pass, hence the parsing.
func memberMessage(msg string) (field, message string, ok bool) {
	m := quotedMember.FindStringSubmatch(msg)
	if m == nil {
		return "", "", false
	}
	field, err := strconv.Unquote(m[1])
	if err != nil || field == "" || strings.ContainsRune(field, 0) {
		return "", "", false
	}
	return field, m[2], true
}

var quotedMember = regexp.MustCompile(`^("(?:[^"\\]|\\.)*") (.+)$`)

// beyondTypeRange reports whether a decoding message is about a number beyond what the field's
// Go type (or a float64) holds.
func beyondTypeRange(message string) bool {
	return strings.HasPrefix(message, "must be an integer from ") || message == "is a number out of range"
}

const bodyTypeKey = "bodyType"

// bodyType is the Go type of the Body field of an operation's input type, if it has one.
func bodyType(t reflect.Type) (reflect.Type, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	if f, ok := t.FieldByName("Body"); ok {
		return f.Type, true
	}
	return nil, false
}

// documentedRange words, for a number beyond what an integer field holds (1e308, 1e400,
// 9223372036854775808), the range the field documents: its minimum and maximum tags within its
// Go type's range ("must be an integer from 1048576 to 9223372036854775807"), not the Go type's
// alone nor "a number out of range". "" when field (huma's notation, "items[3].size") names no
// integer member of the operation's body.
func documentedRange(hctx huma.Context, field string) string {
	if hctx == nil {
		return ""
	}
	op := hctx.Operation()
	if op == nil {
		return ""
	}
	t, _ := op.Metadata[bodyTypeKey].(reflect.Type)
	f, ok := memberField(t, field)
	if !ok {
		return ""
	}
	ft := f.Type
	for ft.Kind() == reflect.Pointer {
		ft = ft.Elem()
	}
	// An element of a list ("list[1]") has its type's range; the tags bound the list's field.
	tags := true
	for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Array {
		ft, tags = ft.Elem(), false
	}
	if !tags && !strings.HasSuffix(field, "]") {
		return ""
	}
	var lo, hi *big.Float
	switch ft.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		lo = new(big.Float).SetInt64(int64(-1) << (ft.Bits() - 1))
		hi = new(big.Float).SetInt64(int64(uint64(1)<<(ft.Bits()-1) - 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		lo = new(big.Float)
		hi = new(big.Float).SetUint64(math.MaxUint64 >> (64 - ft.Bits()))
	default:
		return ""
	}
	if m, err := strconv.ParseFloat(f.Tag.Get("minimum"), 64); err == nil && tags {
		if b := new(big.Float).SetFloat64(math.Ceil(m)); b.Cmp(lo) > 0 {
			lo = b
		}
	}
	if m, err := strconv.ParseFloat(f.Tag.Get("maximum"), 64); err == nil && tags {
		if b := new(big.Float).SetFloat64(math.Floor(m)); b.Cmp(hi) < 0 {
			hi = b
		}
	}
	return "must be an integer from " + lo.Text('f', 0) + " to " + hi.Text('f', 0)
}

// memberField finds the struct field that the JSON member at field ("a.b[3].c") decodes into,
// within t: members match json names exactly (requestJSON), embedded structs are looked into.
func memberField(t reflect.Type, field string) (reflect.StructField, bool) {
	var found reflect.StructField
	if t == nil || field == "" {
		return found, false
	}
	for _, name := range strings.Split(field, ".") {
		name, _, _ = strings.Cut(name, "[")
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return found, false
		}
		f, ok := jsonMember(t, name)
		if !ok {
			return found, false
		}
		found, t = f, f.Type
		// An index ("list[2]") goes into the element type, which the loop above reaches.
	}
	return found, true
}

// jsonMember is the field of struct t whose JSON name is name, embedded structs included.
func jsonMember(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			et := f.Type
			for et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				if inner, ok := jsonMember(et, name); ok {
					return inner, true
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

var requiredProperty = regexp.MustCompile(`^expected required property (\S+) to be present$`)

// fieldName turns huma's "body.items[3].name" or "query.page" into "items[3].name" or "page".
func fieldName(loc string) string {
	for _, p := range []string{"body.", "query.", "path.", "header."} {
		if strings.HasPrefix(loc, p) {
			return strings.TrimPrefix(loc, p)
		}
	}
	return loc
}

func requestIDFrom(hctx huma.Context) (id string) {
	defer func() { _ = recover() }() // not a Fiber context: no id
	if fc := humafiber.Unwrap(hctx); fc != nil {
		if id, ok := fc.Locals(requestIDKey).(string); ok {
			return id
		}
	}
	return ""
}

// AsRoutes provides a module's Routes to the server.
func AsRoutes(f any) any {
	return fx.Annotate(f, fx.As(new(Routes)), fx.ResultTags(`group:"routes"`))
}
