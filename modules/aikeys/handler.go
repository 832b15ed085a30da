package aikeys

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humafiber"
	"github.com/gofiber/fiber/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
	"provisioner/platform/ratelimit"
)

// Handler serves /api/me/ai-keys* and the generation routes.
type Handler struct {
	keys     *Keys
	upstream *Upstream
	meter    *Meter
	limiter  *ratelimit.Limiter
	pass     *Passthrough
	// genLimits are the generate operation's schema limits for fastGenerate (nil: it is off).
	genLimits *generateLimits
}

type aiKeyIDInput struct {
	ID int64 `path:"id" minimum:"1"`
}

type aiKeyCreateInput struct {
	Body struct {
		_         struct{}   `additionalProperties:"true"`
		Name      string     `json:"name" minLength:"1" maxLength:"100" pattern:"^[^\\x00-\\x1f\\x7f-\\x9f]*[^\\x00-\\x20\\x7f-\\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\\x00-\\x1f\\x7f-\\x9f]*$" patternDescription:"not blank (white space only), without control characters" example:"ci pipeline"`
		ExpiresAt *time.Time `json:"expiresAt,omitempty" doc:"After this instant the key is refused (ISO 8601; in the future, and before 10000-01-01T00:00:00Z)."`
	}
}

// Resolve checks what the schema cannot, alongside it.
func (in *aiKeyCreateInput) Resolve(huma.Context) []error {
	var errs []error
	if msg := httpx.DisplayTextProblem(in.Body.Name); msg != "" {
		errs = append(errs, httpx.Invalid("name", msg))
	} else if in.Body.Name != "" && strings.TrimSpace(in.Body.Name) == "" {
		// As Keys.Create says (it trims the name): said here too, in place of the schema's pattern.
		errs = append(errs, httpx.Invalid("name", "must not be blank"))
	}
	if msg := expiresAtProblem(in.Body.ExpiresAt); msg != "" {
		errs = append(errs, httpx.Invalid("expiresAt", msg))
	}
	return errs
}

type aiKeyRotateInput struct {
	ID   int64 `path:"id" minimum:"1"`
	Body *struct {
		_                  struct{} `additionalProperties:"true"`
		GracePeriodSeconds int      `json:"gracePeriodSeconds,omitempty" minimum:"0" maximum:"86400" doc:"How long the old key text keeps working; 0 (default): it stops at once. Earlier rotated-out texts keep their own grace periods either way."`
	} `required:"false"`
}

type generateInput struct {
	Body GenerateInput
}

// Resolve checks what the schema cannot: a model name is sent upstream and echoed back, so it is
// one line of printable text (no control, bidi or invisible format characters).
func (in *generateInput) Resolve(huma.Context) []error {
	if msg := httpx.DisplayTextProblem(in.Body.Model); msg != "" {
		return []error{httpx.Invalid("model", msg)}
	}
	return nil
}

type apiKeyPrincipal struct{}

// keyCall is what requireKey hands the operation: the key's principal and the request's Fiber
// context (whose headers an upstream 429 takes our rate-limit headers off).
type keyCall struct {
	Principal
	c *fiber.Ctx
}

// requireKey is the huma middleware of X-API-Key operations.
func (h *Handler) requireKey(api huma.API) func(huma.Context, func(huma.Context)) {
	return func(ctx huma.Context, next func(huma.Context)) {
		presented, unambiguous := singleHeader(humafiber.Unwrap(ctx), "X-API-Key")
		var p Principal
		var err error
		if !unambiguous {
			err = httpx.Unauthorized("Ambiguous credentials: send one X-API-Key")
		} else if presented == "" && len(humafiber.Unwrap(ctx).Request().Header.Peek(fiber.HeaderAuthorization)) > 0 {
			// An AI key sent the OpenAI SDKs' way, or a JWT: say where this route reads the key.
			err = httpx.Unauthorized("This route takes the AI key in X-API-Key (Authorization: Bearer is read on /api/ai/v1/chat/completions only)")
		} else {
			p, err = h.keys.Authenticate(ctx.Context(), presented)
		}
		if err == nil {
			var r ratelimit.Result
			r, err = h.limiter.Enforce(ctx.Context(), "AiGenerate", strconv.FormatInt(p.KeyID, 10))
			if r.Limit > 0 {
				ratelimit.SetHeaders(humafiber.Unwrap(ctx), r)
			}
			err = limitError(err)
		}
		if err != nil {
			authn.WriteError(api, ctx, err)
			return
		}
		next(huma.WithValue(ctx, apiKeyPrincipal{}, keyCall{Principal: p, c: humafiber.Unwrap(ctx)}))
	}
}

// limitError is the answer to a refusal of the per-key limit: its 429 with the headers.
func limitError(err error) error {
	var le *ratelimit.LimitError
	if errors.As(err, &le) {
		return httpx.FromError(le)
	}
	return err
}

// generate runs a generation for keyID, for the generate operation and fastGenerate, and meters it.
func (h *Handler) generate(c *fiber.Ctx, keyID int64, in GenerateInput) (*Generation, error) {
	if !h.upstream.Configured() {
		return nil, httpx.Unavailable("No AI upstream is configured (Ai:BaseUrl)")
	}
	g, err := h.upstream.Generate(c, in)
	if err != nil {
		if e := httpx.FromError(err); e.Status == http.StatusTooManyRequests && c != nil {
			dropLimitHeaders(c) // the upstream's limit: its Retry-After alone
		}
		return nil, err // not metered: only a generation answered counts
	}
	h.meter.Add(keyID, g.Usage.PromptTokens, g.Usage.CompletionTokens)
	return g, nil
}

// Register implements httpx.Routes.
func (h *Handler) Register(api *httpx.API) {
	tags := []string{"AI keys"}
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "listMyAiKeys", Method: http.MethodGet,
		Path: "/api/me/ai-keys", Tags: tags, Summary: "List my AI keys",
		Description: "Never the key text; usage is flushed about every second. `status` is `Active`, `Revoked`, or `Expired` (an active key past its `expiresAt`: refused, and not counted toward the quota). A revoked or expired key is listed, with its usage, for 30 days after it stopped working, then left out (its row, usage and audit events are kept); of those, the 100 that ended last at most."},
		func(ctx context.Context, _ *struct{}) (*httpx.Response[[]View], error) {
			list, err := h.keys.List(ctx, authn.FromContext(ctx).UserID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", list), nil
		})
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "createMyAiKey", Method: http.MethodPost, Metadata: httpx.Idempotent(),
		Path: "/api/me/ai-keys", Tags: tags, Summary: "Create an AI key", DefaultStatus: http.StatusCreated,
		Description: "The key text (`sk-prov-…`) is in this answer only; only its SHA-256 is stored. The name is trimmed; a blank one is a 400, " +
			"and so is one holding a control character or a bidirectional override or isolate (U+202A–U+202E, U+2066–U+2069). " +
			"`expiresAt` must be in the future and before 10000-01-01T00:00:00Z (400). " +
			"409 at `AiKeys:MaxPerUser` usable keys (Active and not expired: expired and revoked keys do not count).",
		Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *aiKeyCreateInput) (*httpx.Response[View], error) {
			v, err := h.keys.Create(ctx, CreateInput{UserID: authn.FromContext(ctx).UserID, Name: in.Body.Name, ExpiresAt: in.Body.ExpiresAt})
			if err != nil {
				return nil, err
			}
			return httpx.Created("AI key created; copy it now, it is shown once", *v), nil
		})
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "rotateMyAiKey", Method: http.MethodPost, Metadata: httpx.Idempotent(),
		Path: "/api/me/ai-keys/{id}/rotate", Tags: tags, Summary: "Rotate an AI key",
		Description: "Answers the new key text once. The old text stops working at once (on every replica), or when `gracePeriodSeconds` ends; the key's id, usage and limits carry over. " +
			"Every rotated-out text keeps its own grace period whatever later rotations do: a rotation with `gracePeriodSeconds` 0 ends only the text it rotates out. " +
			"Revoking the key, deleting its user or the key's `expiresAt` ends every grace period at once. " +
			"409 for a revoked or expired key, and for a rotation with a grace period while 10 rotated-out texts of the key are still in theirs.",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *aiKeyRotateInput) (*httpx.Response[View], error) {
			grace := 0
			if in.Body != nil {
				grace = in.Body.GracePeriodSeconds
			}
			v, err := h.keys.Rotate(ctx, in.ID, authn.FromContext(ctx).UserID, time.Duration(grace)*time.Second)
			if err != nil {
				return nil, err
			}
			return httpx.OK("AI key rotated; copy the new key now, it is shown once", *v), nil
		})
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "revokeMyAiKey", Method: http.MethodDelete,
		Path: "/api/me/ai-keys/{id}", Tags: tags, Summary: "Revoke an AI key", Description: "The key is refused at once, on every replica.",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *aiKeyIDInput) (*httpx.Response[View], error) {
			v, err := h.keys.Revoke(ctx, in.ID, authn.FromContext(ctx).UserID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("AI key revoked", *v), nil
		})

	gen := []string{"AI generation"}
	// The plain requests are answered ahead of the operation (fastGenerate); the rest go on to it.
	api.Fiber().Post("/api/ai/generate", h.fastGenerate)
	httpx.Register(api, httpx.APIKey, huma.Operation{OperationID: "generate", Method: http.MethodPost, Path: "/api/ai/generate",
		Tags: gen, Summary: "Generate text", Middlewares: huma.Middlewares{h.requireKey(api.API)},
		Description: "Runs one chat completion at `{Ai:BaseUrl}/chat/completions`. 401 for a bad, revoked or expired key, for ambiguous credentials (two different `X-API-Key` values), and for a key sent only as `Authorization: Bearer` (this route reads `X-API-Key`; the message says so); " +
			"400 for a `model` holding a control character, a bidirectional override or isolate or an invisible format character (it is sent upstream and echoed); " +
			"400 when the upstream refuses the request itself (400, 404, 409, 413 or 422, " +
			"with a JSON error body: an unknown `model`, a prompt beyond the model's context), the message quoting the upstream's (one line, at most 300 characters, `Ai:ApiKey` redacted) and " +
			"`errors` naming the field when the upstream names its parameter or the model is not found (404); " +
			"502 when the upstream fails (5xx, any other status but 200 and 429 — a redirect, a 2xx other than 200, another 4xx such as 402 or 405 — or a 4xx without a JSON error: a wrong `Ai:BaseUrl`), refuses the gateway's own `Ai:ApiKey` (401, 403, 407), times out (`Ai:TimeoutSeconds` for the whole answer) or answers more than 16 MiB. " +
			"A request that meets a keep-alive connection the upstream closed while idle is sent again once, on a fresh connection.",
		Errors: []int{http.StatusBadRequest, http.StatusBadGateway, http.StatusServiceUnavailable},
		Responses: map[string]*huma.Response{
			"429": {Description: "Past `RateLimit:AiGenerate` for this key (with the `X-RateLimit-*` and `RateLimit` headers), or the upstream's own 429 " +
				"(with the upstream's `Retry-After`, else 1, and without our rate-limit headers, which would contradict it).",
				Headers: map[string]*huma.Param{"Retry-After": {Description: "Seconds to wait; always sent with this 429.", Required: true, Schema: &huma.Schema{Type: "integer"}}}},
			"502": {Description: "The upstream failed, timed out, refused the gateway's `Ai:ApiKey`, answered more than 16 MiB or something that is no chat completion. " +
				"No `Retry-After`: the upstream gave no time to wait."},
		}},
		func(ctx context.Context, in *generateInput) (*httpx.Response[Generation], error) {
			p, _ := ctx.Value(apiKeyPrincipal{}).(keyCall)
			g, err := h.generate(p.c, p.KeyID, in.Body)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", *g), nil
		})

	limits, err := readGenerateLimits(api.OpenAPI())
	if err != nil {
		slog.Warn("POST /api/ai/generate: every request goes through the huma operation", "reason", err.Error())
	}
	h.genLimits = limits

	// The OpenAI-compatible pass-through streams server-sent events, which huma does not relay
	// chunk by chunk: it is a Fiber route, documented here by hand.
	api.Fiber().Post("/api/ai/v1/chat/completions", h.pass.Handle)
	api.WriteErrorsUnder("/api/ai/v1/", writeOpenAIError)
	api.OpenAPI().AddOperation(&huma.Operation{
		OperationID: "chatCompletions", Method: http.MethodPost, Path: "/api/ai/v1/chat/completions", Tags: gen,
		Summary: "OpenAI-compatible chat completions",
		Description: "A pass-through to `{Ai:BaseUrl}/chat/completions` in OpenAI's own format (not the envelope), so the official " +
			"OpenAI SDKs work with `base_url={base}/api/ai/v1` and the AI key as their API key. The key is accepted as `X-API-Key` " +
			"or `Authorization: Bearer`; two different `X-API-Key` values or Bearer tokens, or an `X-API-Key` with a different Bearer, are ambiguous (401). " +
			"`stream: true` is relayed as server-sent events chunk by chunk, whatever the stream's length; usage is metered from the " +
			"final usage chunk, which the gateway always requests (`stream_options.include_usage`) but relays only to a client that asked for it. " +
			"While the upstream is silent, a stream carries an SSE comment (`: keep-alive`, ignored by SSE clients and SDKs) after every 5 s without a write; " +
			"when it (or any event) cannot reach the client, the upstream request is cancelled at once. " +
			"A client that disconnects mid-stream is charged for what the upstream generated until then: the usage chunk's tokens if it came, else one completion token per content delta read. " +
			"`Ai:TimeoutSeconds` bounds each wait for the upstream (for the answer to begin, then between two chunks), not a stream's length; " +
			"a stream the upstream stalls (`upstream_timeout`) or breaks off (`upstream_cut`) ends with an error event " +
			"`data: {\"error\": {message, type, param, code}}` and no `[DONE]`, so SDKs raise. " +
			"Every error, including those raised before the handler (404 under `/api/ai/v1/`, 405, 413 over 1 MiB, 415 for a compressed body, the per-IP 429, 500), follows OpenAI's " +
			"`{error: {message, type, param, code}}`. Of the upstream's statuses only 200 (a JSON object), 429 and the refusals of the client's own request " +
			"(400, 404, 409, 413, 422 with a JSON error body) are relayed; every other one is a 502. A relayed error is rewritten in OpenAI's format as `application/json`: the upstream's " +
			"`message`, `type`, `param` and `code` are kept when they are strings (`param` and `code` may be null; a top-level `message` or `detail`, or an `error` string, is taken for the message), " +
			"the message on one line, at most 2,000 characters; what is missing is filled in (`type: invalid_request_error`, `requests` for a 429; `param` and `code` null). " +
			"Whatever is relayed (an answer, a relayed 4xx, every line of a stream, its error events included) has the gateway's own upstream key (`Ai:ApiKey`) " +
			"replaced by `[redacted]` should the upstream write it, as it is or JSON-escaped (`\\/`, `\\u002d`, any character escaped), " +
			"even split across two of the upstream's writes; a stream is still relayed line by line as it comes.",
		Security: []map[string][]string{{httpx.SchemeAPIKey: {}}, {httpx.SchemeAIKeyBearer: {}}},
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {
			Schema: &huma.Schema{Type: "object", Description: "An OpenAI chat completion request.", Required: []string{"messages"},
				Properties: map[string]*huma.Schema{
					"model":    {Type: "string"},
					"messages": {Type: "array", Items: &huma.Schema{Type: "object"}},
					"stream":   {Type: "boolean"},
				}}}}},
		Responses: map[string]*huma.Response{
			"200": {Description: "The upstream's chat completion, or a text/event-stream when `stream` is true.",
				Content: map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Type: "object"}}, "text/event-stream": {Schema: &huma.Schema{Type: "string"}}}},
			"400": {Description: "The body is not a JSON object, or its `messages` is missing, not an array or empty (OpenAI error format, `param: \"messages\"`), or its `stream`, `stream_options` or `model` is not a boolean, an object or a string (`invalid_type`, `param` naming it), or it is not valid UTF-8 (`invalid_utf8`) or names a member twice in one object (`duplicate_member`); or the upstream's own 400 with a JSON error (a bad parameter, a prompt beyond the model's context), relayed."},
			"401": {Description: "Bad, revoked or expired key, or ambiguous credentials (OpenAI error format, `code: invalid_api_key`)."},
			"404": {Description: "The upstream's own 404 with a JSON error (an unknown model), relayed."},
			"409": {Description: "The upstream's own 409 with a JSON error, relayed."},
			"413": {Description: "A body over 1 MiB (OpenAI error format, `code: request_too_large`), or the upstream's own 413 with a JSON error (a prompt too large), relayed."},
			"415": {Description: "A `Content-Encoding` other than `identity` (a gzip, deflate or brotli body): bodies are taken uncompressed only (OpenAI error format, `code: unsupported_encoding`; the answer carries `Accept-Encoding: identity`), or a `Content-Type` whose `charset` is not `utf-8` (`code: unsupported_charset`), or a `Content-Type` other than `application/json`, a `+json` type or none (`code: unsupported_content_type`)."},
			"422": {Description: "The upstream's own 422 with a JSON error, relayed."},
			"429": {Description: "Per-key rate limit (OpenAI error format, with the `X-RateLimit-*` and `RateLimit` headers), the per-IP limit, or the upstream's own 429, relayed with its `Retry-After` " +
				"(an HTTP date turned into seconds; 1 when it gave none or an unreadable one) and without the gateway's rate-limit headers.",
				Headers: map[string]*huma.Param{"Retry-After": {Description: "Seconds to wait; always sent with this 429.", Required: true, Schema: &huma.Schema{Type: "integer"}}}},
			"500": {Description: "An unexpected error (OpenAI error format, `code: server_error`)."},
			"502": {Description: "The upstream failed (5xx), did not answer in time or answered 408 (`upstream_timeout` when it answered 408 or a stream stalled, `upstream_unavailable` when no answer came), " +
				"refused the gateway's credentials (401, 403, 407), answered a status the route does not relay (a 1xx, a redirect such as a wrong `Ai:BaseUrl`'s http→https one, a 2xx other than 200, " +
				"a 4xx other than 400, 404, 409, 413, 422 and 429, or one of those without a JSON error body: `upstream_error`), answered more than 16 MiB without streaming (`upstream_too_large`) " +
				"or was cut (`upstream_cut`), answered a stream request without a stream (`upstream_not_streaming`), answered a 200 that is no JSON object (`upstream_malformed`), " +
				"or the client left before the upstream answered (`client_gone`). OpenAI error format, `type: server_error`; never metered."},
			"503": {Description: "The key cannot be checked (control database down) or no upstream is configured (OpenAI error format)."},
		},
	})
	// Every error answer is OpenAI's error object (the upstream's relayed 4xx are too).
	errSchema := api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[openAIErrorDoc](), true, "")
	for code, r := range api.OpenAPI().Paths["/api/ai/v1/chat/completions"].Post.Responses {
		if code >= "400" {
			r.Content = map[string]*huma.MediaType{"application/json": {Schema: errSchema}}
		}
	}
}

// openAIErrorDoc documents OpenAI's error format, as openAIErrorBody writes it.
type openAIErrorDoc struct {
	Error openAIErrorObject `json:"error"`
}

type openAIErrorObject struct {
	Message string  `json:"message" doc:"What went wrong."`
	Type    string  `json:"type" doc:"invalid_request_error, requests (rate limit) or server_error; the upstream's own for relayed answers when it gave one." example:"invalid_request_error"`
	Param   *string `json:"param" nullable:"true" doc:"The request member at fault, or null." example:"messages"`
	Code    *string `json:"code" nullable:"true" doc:"A machine-readable code, say invalid_api_key, rate_limit_exceeded, upstream_error; null in some relayed answers." example:"invalid_api_key"`
}
