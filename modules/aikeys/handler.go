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
	caps     *Caps
	budgets  *Budgets
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
		ExpiresAt *time.Time `json:"expiresAt,omitempty" doc:"Refused after this instant (before year 10000)."`
		Policy    PolicyBody `json:"policy,omitempty"`
	}
}

type aiKeyPatchInput struct {
	ID   int64 `path:"id" minimum:"1"`
	Body PolicyBody
}

type userAiKeyPatchInput struct {
	UserID int64 `path:"userId" minimum:"1" doc:"The key's owner."`
	ID     int64 `path:"id" minimum:"1"`
	Body   PolicyBody
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
		GracePeriodSeconds int      `json:"gracePeriodSeconds,omitempty" minimum:"0" maximum:"86400" doc:"How long the old key text keeps working; 0 (default): it stops at once."`
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

// generate runs a generation for p, for the generate operation and fastGenerate, and meters it:
// the model must be allowed, max_tokens is capped (maxTokensHeader says what was sent), and the
// upstream's `user` is p's owner.
func (h *Handler) generate(c *fiber.Ctx, p Principal, in GenerateInput) (*Generation, error) {
	keyID := p.KeyID
	if !h.upstream.Configured() {
		return nil, httpx.Unavailable("No AI upstream is configured (Ai:BaseUrl)")
	}
	model, err := h.caps.Model(p, in.Model)
	if err != nil {
		h.meter.Refused(keyID)
		return nil, httpx.BadRequest("Model not allowed", httpx.FieldError{Field: "model", Message: err.Error()})
	}
	var requested int64
	if in.MaxTokens != nil {
		requested = int64(*in.MaxTokens)
	}
	mt := int(h.caps.Tokens(p, requested))
	in.Model, in.MaxTokens = model, &mt
	if c != nil {
		c.Set(maxTokensHeader, strconv.Itoa(mt))
	}
	var ctx context.Context = context.Background()
	if c != nil {
		ctx = c.UserContext()
	}
	held, err := h.budgets.Reserve(ctx, p, promptEstimate(len(in.System)+len(in.Prompt))+int64(mt))
	if err != nil {
		h.meter.Refused(keyID)
		return nil, err
	}
	g, err := h.upstream.Generate(c, in, userField(p))
	if err != nil {
		held.release()
		if e := httpx.FromError(err); e.Status == http.StatusTooManyRequests && c != nil {
			dropLimitHeaders(c) // the upstream's limit: its Retry-After alone
		}
		return nil, err // not metered: only a generation answered counts
	}
	held.settle(g.Usage.PromptTokens + g.Usage.CompletionTokens)
	h.meter.Add(keyID, g.Usage.PromptTokens, g.Usage.CompletionTokens)
	return g, nil
}

// Register implements httpx.Routes.
func (h *Handler) Register(api *httpx.API) {
	tags := []string{"AI keys"}
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "listMyAiKeys", Method: http.MethodGet,
		Path: "/api/me/ai-keys", Tags: tags, Summary: "List my AI keys",
		Description: "Never the key text; ended keys are listed for 30 days (at most 100)."},
		func(ctx context.Context, _ *struct{}) (*httpx.Response[[]View], error) {
			list, err := h.keys.List(ctx, authn.FromContext(ctx).UserID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", list), nil
		})
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "createMyAiKey", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/me/ai-keys", Tags: tags, Summary: "Create an AI key", DefaultStatus: http.StatusCreated,
		Description: "The key text is in this answer only. 409 at `AiKeys:MaxPerUser` usable keys.",
		Errors:      []int{http.StatusConflict}},
		func(ctx context.Context, in *aiKeyCreateInput) (*httpx.Response[View], error) {
			if err := in.Body.Policy.check(h.caps); err != nil {
				return nil, err
			}
			v, err := h.keys.Create(ctx, CreateInput{UserID: authn.FromContext(ctx).UserID, Name: in.Body.Name, ExpiresAt: in.Body.ExpiresAt, Policy: in.Body.Policy})
			if err != nil {
				return nil, err
			}
			return httpx.Created("AI key created; copy it now, it is shown once", *v), nil
		})
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "rotateMyAiKey", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/me/ai-keys/{id}/rotate", Tags: tags, Summary: "Rotate an AI key",
		Description: "The new key text, once; the old works until `gracePeriodSeconds` ends. 409 for a revoked or expired key, or at 10 texts in grace.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict}},
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
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "revokeMyAiKey", Metadata: httpx.PerUserLimit("Provision"), Method: http.MethodDelete,
		Path: "/api/me/ai-keys/{id}", Tags: tags, Summary: "Revoke an AI key", Description: "The key is refused at once, on every replica.",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *aiKeyIDInput) (*httpx.Response[View], error) {
			v, err := h.keys.Revoke(ctx, in.ID, authn.FromContext(ctx).UserID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("AI key revoked", *v), nil
		})

	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "setMyAiKeyPolicy", Method: http.MethodPatch,
		Path: "/api/me/ai-keys/{id}", Tags: tags, Summary: "Set an AI key's policy",
		Description: "0 or [] clears; 409 if revoked.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *aiKeyPatchInput) (*httpx.Response[View], error) {
			return h.setPolicy(ctx, in.ID, authn.FromContext(ctx).UserID, in.Body)
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "setUserAiKeyPolicy", Method: http.MethodPatch,
		Path: "/api/users/{userId}/ai-keys/{id}", Tags: tags, Summary: "Set a user's AI key policy",
		Description: "As PATCH /api/me/ai-keys/{id}, for an admin; audited. The user's own ceiling is `aiMonthlyTokenBudget` of PUT /api/users/{id}.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *userAiKeyPatchInput) (*httpx.Response[View], error) {
			return h.setPolicy(ctx, in.ID, in.UserID, in.Body)
		})

	h.registerUsage(api)

	gen := []string{"AI generation"}
	// The plain requests are answered ahead of the operation (fastGenerate); the rest go on to it.
	api.Fiber().Post("/api/ai/generate", h.fastGenerate)
	httpx.Register(api, httpx.APIKey, huma.Operation{OperationID: "generate", Method: http.MethodPost, Path: "/api/ai/generate",
		Tags: gen, Summary: "Generate text", Middlewares: huma.Middlewares{h.requireKey(api.API)},
		Description: "One chat completion at `{Ai:BaseUrl}`. 400 when the upstream refuses the request (its message quoted); " +
			"502 when it fails. " + capsDoc,
		Errors: []int{http.StatusBadRequest, http.StatusBadGateway, http.StatusServiceUnavailable},
		Responses: map[string]*huma.Response{
			"429": {Description: "Past `RateLimit:AiGenerate` or the key's budget, or the upstream's own 429 (its `Retry-After`, without our " +
				"rate-limit headers).",
				Headers: map[string]*huma.Param{"Retry-After": {Description: "Seconds to wait; always sent with this 429.", Required: true, Schema: &huma.Schema{Type: "integer"}}}},
			"502": {Description: "The upstream failed, timed out or answered something unusable; no `Retry-After`."},
		}},
		func(ctx context.Context, in *generateInput) (*httpx.Response[Generation], error) {
			p, _ := ctx.Value(apiKeyPrincipal{}).(keyCall)
			g, err := h.generate(p.c, p.Principal, in.Body)
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
		Description: "A pass-through to `{Ai:BaseUrl}/chat/completions` in OpenAI's format, for the OpenAI SDKs " +
			"(`base_url={base}/api/ai/v1`); streams are relayed as server-sent events; errors are OpenAI's. " + capsDoc,
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
			"400": {Description: "A malformed body: not a JSON object, `messages` missing or empty, a member of the wrong type " +
				"(`invalid_type`), not UTF-8 (`invalid_utf8`), a duplicate member (`duplicate_member`); a model or `n` " +
				"past the caps; or the upstream's 400, relayed."},
			"401": {Description: "Bad, revoked, expired or ambiguous key (`invalid_api_key`)."},
			"404": {Description: "The upstream's own 404 with a JSON error (an unknown model), relayed."},
			"409": {Description: "The upstream's own 409 with a JSON error, relayed."},
			"413": {Description: "A body over 1 MiB (`request_too_large`), or the upstream's 413, relayed."},
			"415": {Description: "A compressed body (`unsupported_encoding`), a `charset` other than `utf-8` (`unsupported_charset`), or a " +
				"`Content-Type` other than JSON (`unsupported_content_type`)."},
			"422": {Description: "The upstream's own 422 with a JSON error, relayed."},
			"429": {Description: "The per-key or per-IP rate limit, the key's budget (`budget_exceeded`), or the upstream's 429, relayed with its `Retry-After` and without our " +
				"rate-limit headers.",
				Headers: map[string]*huma.Param{"Retry-After": {Description: "Seconds to wait; always sent with this 429.", Required: true, Schema: &huma.Schema{Type: "integer"}}}},
			"500": {Description: "An unexpected error (`server_error`)."},
			"502": {Description: "The upstream failed, timed out (`upstream_timeout`, `upstream_unavailable`), refused the gateway's " +
				"credentials, answered a status not relayed (`upstream_error`), too much (`upstream_too_large`), was cut " +
				"(`upstream_cut`), not a stream (`upstream_not_streaming`) or malformed (`upstream_malformed`), or the " +
				"client left (`client_gone`). Never metered."},
			"503": {Description: "The key cannot be checked, or no upstream is configured."},
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

// setPolicy checks body against the platform's caps and sets it on owner's key id.
func (h *Handler) setPolicy(ctx context.Context, id, owner int64, body PolicyBody) (*httpx.Response[View], error) {
	if err := body.check(h.caps); err != nil {
		return nil, err
	}
	v, err := h.keys.SetPolicy(ctx, id, owner, body)
	if err != nil {
		return nil, err
	}
	return httpx.OK("AI key policy set", *v), nil
}

// capsDoc documents the caps (Caps) on both generation routes.
const capsDoc = "Caps, budgets: modules/aikeys/README.md."

// openAIErrorDoc documents OpenAI's error format, as openAIErrorBody writes it.
type openAIErrorDoc struct {
	Error openAIErrorObject `json:"error"`
}

type openAIErrorObject struct {
	Message string  `json:"message" doc:"What went wrong."`
	Type    string  `json:"type" doc:"invalid_request_error, requests or server_error, or the upstream's." example:"invalid_request_error"`
	Param   *string `json:"param" nullable:"true" doc:"The request member at fault, or null." example:"messages"`
	Code    *string `json:"code" nullable:"true" doc:"Say invalid_api_key; null in some relayed answers." example:"invalid_api_key"`
}
