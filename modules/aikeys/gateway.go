package aikeys

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"provisioner/platform/httpx"
	"provisioner/platform/ratelimit"
	"provisioner/platform/redact"
)

// Upstream calls the OpenAI-compatible generation service: fasthttp's client for plain answers
// (no per-connection goroutines on the hot path), net/http for streams.
type Upstream struct {
	base, key, model string
	secret           *redact.Secret // finds key in what the upstream answers, escaped or not
	timeout          time.Duration
	http             *http.Client
	fast             *fasthttp.Client
	calls            *sync.Map // plain calls in flight whose client is watched (upstreamTransport)
}

// NewUpstream builds the clients; keep-alive connections are pooled for the hot path, and dropped
// after idleConnTimeout idle, before the usual upstream closes them. A request that meets an idle
// connection the upstream closed anyway (a shorter timeout, or a race with ours) is sent again,
// once, on a fresh connection.
func NewUpstream(base, key, model string, timeout time.Duration) *Upstream {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        512,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     idleConnTimeout,
		DisableCompression:  true, // relay bytes as they come
	}
	calls := new(sync.Map)
	fast := &fasthttp.Client{MaxConnsPerHost: 512, MaxIdleConnDuration: idleConnTimeout, ReadTimeout: timeout,
		WriteTimeout: timeout, NoDefaultUserAgentHeader: true, MaxResponseBodySize: maxAnswer,
		// The most recently used connection first: the least likely to have been closed, and
		// the ones beyond the working set go idle and are dropped.
		ConnPoolStrategy: fasthttp.LIFO,
		DialTimeout:      dialStale, Transport: upstreamTransport{calls: calls},
		MaxIdemponentCallAttempts: 2, // at most one retry, and only when upstreamTransport says so
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, true },
	}
	return &Upstream{base: strings.TrimRight(base, "/"), key: key, secret: redact.NewSecret(key), model: model, timeout: timeout, http: &http.Client{Transport: tr, CheckRedirect: noRedirects}, fast: fast, calls: calls}
}

// noRedirects makes a stream request's redirect the answer (a 502, see sendAnswer), as fasthttp
// does for the other calls: a redirect is a wrong Ai:BaseUrl, and following it would turn the POST
// into a GET (301, 302, 303) or send the prompt and Ai:ApiKey somewhere not configured.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// maxAnswer bounds a non-streamed answer read into memory.
const maxAnswer = 16 << 20

// errAnswerTooLarge means the upstream's answer exceeded maxAnswer.
var errAnswerTooLarge = errors.New("answer too large")

// answer is a non-streamed upstream answer.
type answer struct {
	status      int
	contentType string
	retryAfter  string
	body        []byte
}

// postFast sends a non-streaming request and reads the whole answer (at most maxAnswer bytes).
// While it waits, the connection of c's client is watched (after clientCheckDelay): when the
// client is gone, the call is abandoned (errClientGone) and the upstream stops generating.
func (u *Upstream) postFast(c *fiber.Ctx, body []byte) (answer, error) {
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	if c != nil {
		cl := &call{}
		u.calls.Store(req, cl)
		stop := watchClient(c, cl.abandon)
		defer u.calls.Delete(req)
		defer stop()
	}
	req.SetRequestURI(u.base + "/chat/completions")
	req.Header.SetMethod(http.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set("Accept", "application/json")
	if u.key != "" {
		req.Header.Set("Authorization", "Bearer "+u.key)
	}
	req.SetBody(body)
	if err := u.fast.DoTimeout(req, res, u.timeout); err != nil {
		if errors.Is(err, fasthttp.ErrBodyTooLarge) {
			return answer{}, errAnswerTooLarge
		}
		return answer{}, err // errClientGone included
	}
	return answer{status: res.StatusCode(), contentType: string(res.Header.ContentType()),
		retryAfter: string(res.Header.Peek(fiber.HeaderRetryAfter)), body: append([]byte(nil), res.Body()...)}, nil
}

// Configured reports whether an upstream is set.
func (u *Upstream) Configured() bool { return u.base != "" }

// post sends a request with net/http (for streams). net/http retries a POST only when nothing
// was written; when the request met a reused connection the upstream had closed and nothing came
// back, it is sent again here, once, on a fresh connection.
func (u *Upstream) post(ctx context.Context, body []byte) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.base+"/chat/completions", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if u.key != "" {
			req.Header.Set("Authorization", "Bearer "+u.key)
		}
		var reused, answered atomic.Bool // the trace's callbacks run on the transport's goroutines
		req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			GotConn:              func(i httptrace.GotConnInfo) { reused.Store(i.Reused) },
			GotFirstResponseByte: func() { answered.Store(true) },
		}))
		res, err := u.http.Do(req)
		if err == nil || attempt > 0 || !reused.Load() || answered.Load() || ctx.Err() != nil {
			return res, err
		}
	}
}

// GenerateInput is the body of POST /api/ai/generate.
type GenerateInput struct {
	Prompt      string   `json:"prompt" minLength:"1" maxLength:"200000"`
	System      string   `json:"system,omitempty" maxLength:"100000"`
	Model       string   `json:"model,omitempty" maxLength:"200" doc:"Default: Ai:DefaultModel."`
	MaxTokens   *int     `json:"maxTokens,omitempty" minimum:"1" maximum:"65536"`
	Temperature *float64 `json:"temperature,omitempty" minimum:"0" maximum:"2"`
}

// TokenUsage is what one generation consumed.
type TokenUsage struct {
	PromptTokens     int64 `json:"promptTokens"`
	CompletionTokens int64 `json:"completionTokens"`
	TotalTokens      int64 `json:"totalTokens"`
}

// Generation is the data of POST /api/ai/generate.
type Generation struct {
	Text         string     `json:"text"`
	Model        string     `json:"model"`
	FinishReason string     `json:"finishReason" example:"stop"`
	Usage        TokenUsage `json:"usage"`
}

type chatResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usageFigures `json:"usage"`
}

// maxAnswerTokens bounds each usage figure of one answer (prompt, completion, total): an upstream
// reporting more (or a negative figure) is not believed as it stands, on either route.
const maxAnswerTokens = 1_000_000_000

// tokenCount is one usage figure as the upstream reported it, sanitised as it is read: an integer
// or an integral float (5.0, 1e3) counts, clamped to [0, maxAnswerTokens]; anything else (a
// string, a fraction, null) is 0. It never fails to decode, so a bad figure never makes an answer
// malformed.
type tokenCount int64

// UnmarshalJSON reads a figure; see tokenCount.
func (n *tokenCount) UnmarshalJSON(b []byte) error {
	*n = 0
	if v, err := strconv.ParseInt(string(b), 10, 64); err == nil {
		*n = tokenCount(min(max(v, 0), maxAnswerTokens))
	} else if f, err := strconv.ParseFloat(string(b), 64); err == nil && f == math.Trunc(f) {
		*n = tokenCount(min(max(f, 0), maxAnswerTokens))
	}
	return nil
}

// usageFigures is an answer's usage, each figure sanitised (tokenCount). A usage member that is no
// object (a string, an array) reads as zeros rather than failing the answer.
type usageFigures struct {
	PromptTokens     tokenCount `json:"prompt_tokens"`
	CompletionTokens tokenCount `json:"completion_tokens"`
	TotalTokens      tokenCount `json:"total_tokens"`
}

// UnmarshalJSON reads the figures of an object and zeros for anything else.
func (u *usageFigures) UnmarshalJSON(b []byte) error {
	*u = usageFigures{}
	if len(b) > 0 && b[0] == '{' {
		type plain usageFigures // without this method; its fields never fail
		_ = jsonv1.Unmarshal(b, (*plain)(u))
	}
	return nil
}

// decodeCompletion reads a non-streamed completion for /api/ai/generate. A field of an unexpected
// type is skipped (encoding/json fills the others); a message content given as an array of
// content parts, as some OpenAI-compatible servers answer, is read as their texts joined. Only
// that rare answer is read a second time.
func decodeCompletion(body []byte, cr *chatResponse) error {
	err := jsonv1.Unmarshal(body, cr)
	var te *jsonv1.UnmarshalTypeError
	if err == nil || !errors.As(err, &te) {
		return err
	}
	var parts struct {
		Choices []struct {
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(body, &parts)
	for i := range min(len(parts.Choices), len(cr.Choices)) {
		if c := parts.Choices[i].Message.Content; len(c) > 0 && c[0] == '[' {
			cr.Choices[i].Message.Content = joinTextParts(c)
		}
	}
	return nil
}

// joinTextParts joins the "text" of an array of content parts whose type is text (or not given).
func joinTextParts(raw json.RawMessage) string {
	var parts []struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		var text string
		if (p.Type == "" || p.Type == "text" || p.Type == "output_text") && json.Unmarshal(p.Text, &text) == nil {
			b.WriteString(text)
		}
	}
	return b.String()
}

// Generate runs one chat completion for a prompt; c is the request's (its client is watched: see
// postFast), or nil.
func (u *Upstream) Generate(c *fiber.Ctx, in GenerateInput) (*Generation, error) {
	model := in.Model
	if model == "" {
		model = u.model
	}
	body := appendChatRequest(make([]byte, 0, 128+len(model)+len(in.System)+len(in.Prompt)), model, in)
	a, err := u.postFast(c, body)
	if errors.Is(err, errAnswerTooLarge) {
		return nil, upstreamError("the AI upstream's answer was too large", nil)
	}
	if errors.Is(err, errClientGone) {
		return nil, upstreamError("the client left before the AI upstream answered", nil)
	}
	if err != nil {
		return nil, upstreamError("the AI upstream did not answer", nil)
	}
	if a.status == http.StatusTooManyRequests {
		// The upstream's own limit: the client may retry, when the upstream said (the contract's
		// 429 always carries Retry-After; 1 s when the upstream gave none).
		return nil, httpx.NewError(http.StatusTooManyRequests, "The AI upstream is rate limiting; retry later").WithHeader(fiber.HeaderRetryAfter, upstreamRetryAfter(a.retryAfter))
	}
	if refusedInput(a.status) {
		if err := u.refusal(a); err != nil {
			return nil, err
		}
	}
	if a.status != http.StatusOK {
		return nil, upstreamError(fmt.Sprintf("the AI upstream answered %d", a.status), nil)
	}
	var cr chatResponse
	if err := decodeCompletion(a.body, &cr); err != nil || len(cr.Choices) == 0 {
		return nil, upstreamError("the AI upstream's answer was malformed", nil)
	}
	// Whatever the upstream writes, our Ai:ApiKey is not handed on.
	// Every string copied from the answer (text, model, finish reason) is redacted.
	g := &Generation{Text: u.secret.RedactString(cr.Choices[0].Message.Content), Model: u.secret.RedactString(cr.Model),
		FinishReason: u.secret.RedactString(cr.Choices[0].FinishReason)}
	if g.Model == "" {
		g.Model = model
	}
	if cr.Usage != nil {
		g.Usage = TokenUsage{PromptTokens: int64(cr.Usage.PromptTokens), CompletionTokens: int64(cr.Usage.CompletionTokens), TotalTokens: int64(cr.Usage.TotalTokens)}
	}
	return g, nil
}

func upstreamError(msg string, data any) error { return httpx.BadGateway(msg, data) }

// refusedInput reports whether an upstream status refuses the client's own input, on both routes:
// 400 (a bad parameter, a prompt beyond the model's context), 404 (an unknown model), 409, 413 (a
// prompt too large) and 422. Every other 4xx is the gateway's or the upstream's problem, not the
// client's: 401 and 403 (the gateway's Ai:ApiKey refused), 402 (the upstream account's billing),
// 405, 406 and 415 (a wrong Ai:BaseUrl or a gateway bug), 407 (a proxy's credentials), 408 (the
// upstream's timeout) and so on; 429 (its rate limit) is answered as such.
func refusedInput(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// upstreamRetryAfter is the Retry-After to send with a 429 the upstream answered: its own in
// seconds (an HTTP date turned into the seconds until it), else 1 (the contract's 429 always
// carries Retry-After, an integer).
func upstreamRetryAfter(v string) string {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseUint(v, 10, 31); err == nil {
		return strconv.FormatUint(n, 10)
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := time.Until(t); d > 0 {
			return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
		}
		return "0"
	}
	return "1"
}

// upstreamErr is what an upstream's JSON error answer says (any field may be missing).
type upstreamErr struct {
	Message string
	Type    any
	Param   any
	Code    any
}

// parseUpstreamError reads an upstream error answer in OpenAI's format ({"error": {message, type,
// param, code}}), Ollama's ({"error": "..."}), vLLM's or FastAPI's (a top-level message or
// detail). ok is false when the body is no JSON error (an HTML page from a wrong Ai:BaseUrl, a
// proxy's text).
func parseUpstreamError(body []byte) (e upstreamErr, ok bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || (top["error"] == nil && top["message"] == nil && top["detail"] == nil) {
		return e, false
	}
	var detail struct {
		Message string `json:"message"`
		Type    any    `json:"type"`
		Param   any    `json:"param"`
		Code    any    `json:"code"`
	}
	if json.Unmarshal(top["error"], &detail) != nil {
		_ = json.Unmarshal(top["error"], &detail.Message) // {"error": "model 'x' not found"}
	}
	if detail.Message == "" {
		_ = json.Unmarshal(top["message"], &detail.Message)
		_ = json.Unmarshal(top["param"], &detail.Param)
		if detail.Type == nil {
			_ = json.Unmarshal(top["type"], &detail.Type)
		}
		if detail.Code == nil {
			_ = json.Unmarshal(top["code"], &detail.Code)
		}
	}
	if detail.Message == "" {
		_ = json.Unmarshal(top["detail"], &detail.Message) // FastAPI: {"detail": "..."}
	}
	return upstreamErr(detail), true
}

// maxRefusal bounds the upstream's words quoted in a refusal, in runes.
const maxRefusal = 300

// refusal is the 400 for an upstream answer that refused the client's input: the upstream's own
// message (OpenAI's error.message, an error string as Ollama sends, or a top-level message as
// vLLM sends), one line, at most maxRefusal runes, without control or bidi characters and without
// Ai:ApiKey, and, when the upstream names the parameter at fault (or the model is not found), the
// field it is. An answer that is not a JSON error (an HTML 404 from a wrong Ai:BaseUrl, a proxy's
// page) is no refusal of the input: nil, and the caller answers 502.
func (u *Upstream) refusal(a answer) error {
	detail, ok := parseUpstreamError(a.body)
	if !ok {
		return nil
	}
	msg := fmt.Sprintf("The AI upstream refused the request (%d)", a.status)
	if said := u.sanitize(detail.Message, maxRefusal); said != "" {
		msg += ": " + said
	}
	param, _ := detail.Param.(string)
	field := map[string]string{"model": "model", "max_tokens": "maxTokens", "max_completion_tokens": "maxTokens",
		"temperature": "temperature", "messages": "prompt"}[param]
	if field == "" && (a.status == http.StatusNotFound || detail.Code == "model_not_found") {
		field = "model" // the one thing a chat completion names that can be not found
	}
	if field != "" {
		return httpx.BadRequest(msg, httpx.FieldError{Field: field, Message: "refused by the AI upstream"})
	}
	return httpx.BadRequest(msg)
}

// sanitize makes the upstream's words fit to quote: valid UTF-8, Ai:ApiKey redacted (as it is or
// JSON-escaped: a message may quote JSON), control and bidi characters as spaces, spaces
// collapsed, at most max runes.
func (u *Upstream) sanitize(s string, max int) string {
	s = u.secret.RedactString(strings.ToValidUTF8(s, ""))
	s = strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if httpx.Deceptive(r) {
			return ' '
		}
		return r
	}, s)), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

// Passthrough serves POST /api/ai/v1/chat/completions: an OpenAI-compatible relay. Errors are in
// OpenAI's format ({error: {message, type, code}}) so OpenAI SDKs understand them.
type Passthrough struct {
	keys     *Keys
	upstream *Upstream
	meter    *Meter
	limiter  *ratelimit.Limiter
	log      *slog.Logger
}

// openAIError writes an error in OpenAI's format: {error: {message, type, param, code}}.
func openAIError(c *fiber.Ctx, status int, typ, code, param, msg string) error {
	return c.Status(status).JSON(openAIErrorBody(typ, code, param, msg))
}

func openAIErrorBody(typ, code, param, msg string) fiber.Map {
	var p any // null unless a parameter is named, as OpenAI does
	if param != "" {
		p = param
	}
	return fiber.Map{"error": fiber.Map{"message": msg, "type": typ, "param": p, "code": code}}
}

// writeOpenAIError answers, in OpenAI's format, the errors the server raises under the
// pass-through's prefix before or around its handler: no route (404), method not allowed (405),
// body over 1 MiB (413), a compressed or non-UTF-8 body (415), the per-IP limit (429), a panic (500).
func writeOpenAIError(c *fiber.Ctx, e *httpx.Error) error {
	typ, code := "invalid_request_error", "invalid_request"
	switch {
	case e.Status == http.StatusUnauthorized:
		code = "invalid_api_key"
	case e.Status == http.StatusNotFound:
		code = "unknown_url"
	case e.Status == http.StatusMethodNotAllowed:
		code = "method_not_allowed"
	case e.Status == http.StatusRequestEntityTooLarge:
		code = "request_too_large"
	case e.Status == http.StatusUnsupportedMediaType && errors.Is(e, httpx.ErrCharset):
		code = "unsupported_charset"
	case e.Status == http.StatusUnsupportedMediaType:
		code = "unsupported_encoding"
	case e.Status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case e.Status == http.StatusServiceUnavailable:
		typ, code = "server_error", "unavailable"
	case e.Status >= 500:
		typ, code = "server_error", "server_error"
	}
	return openAIError(c, e.Status, typ, code, "", e.Message)
}

// presentedKey reads X-API-Key, or Authorization: Bearer (what OpenAI SDKs send). ok is false
// when the credentials are ambiguous: two different X-API-Key values, two different Bearer
// tokens, or an X-API-Key and a different Bearer (which one would be charged is a guess).
func presentedKey(c *fiber.Ctx) (key string, ok bool) {
	if key, ok = singleHeader(c, "X-API-Key"); !ok {
		return "", false
	}
	for _, a := range c.Request().Header.PeekAll(fiber.HeaderAuthorization) {
		if len(a) <= 7 || !strings.EqualFold(string(a[:7]), "bearer ") {
			continue
		}
		b := strings.TrimSpace(string(a[7:]))
		if key != "" && b != key {
			return "", false
		}
		key = b
	}
	return key, true
}

// singleHeader answers the value of header name, and false when it is sent twice with different
// values (ambiguous credentials).
func singleHeader(c *fiber.Ctx, name string) (string, bool) {
	var found []byte
	for _, v := range c.Request().Header.PeekAll(name) {
		if found != nil && !bytes.Equal(found, v) {
			return "", false
		}
		found = v
	}
	return string(found), true // a copy: PeekAll's slices are reused by the next PeekAll
}

// messagesError says what is wrong with a request's messages ("" when they are a non-empty array),
// with OpenAI's code for it. The body parsed, so raw is valid JSON.
func messagesError(raw json.RawMessage, present bool) (code, msg string) {
	v := bytes.TrimSpace(raw)
	switch {
	case !present:
		return "missing_messages", "Missing required parameter: 'messages'"
	case len(v) == 0 || v[0] != '[':
		return "invalid_type", "Invalid type for 'messages': expected an array of objects"
	case len(bytes.TrimSpace(v[1:len(v)-1])) == 0:
		return "empty_array", "Invalid 'messages': empty array; at least one message is needed"
	}
	return "", ""
}

// jsonKindIs reports whether raw (valid JSON) is null or of the kind named ("a boolean",
// "an object", "a string"): the fields the gateway reads itself must have the type it reads.
func jsonKindIs(raw json.RawMessage, kind string) bool {
	v := bytes.TrimSpace(raw)
	if len(v) == 0 || string(v) == "null" {
		return true
	}
	switch kind {
	case "a boolean":
		return string(v) == "true" || string(v) == "false"
	case "an object":
		return v[0] == '{'
	case "a string":
		return v[0] == '"'
	}
	return false
}

// jsonContentType reports whether a request's Content-Type is JSON, as on the other routes:
// application/json, a structured +json type, or none (the server's middleware has already written
// a valid one in lower case); parameters are ignored (a charset other than UTF-8 was refused before).
func jsonContentType(ct []byte) bool {
	if i := bytes.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	ct = bytes.TrimSpace(ct)
	return len(ct) == 0 || bytes.EqualFold(ct, []byte("application/json")) ||
		(bytes.IndexByte(ct, '/') > 0 && len(ct) > 5 && bytes.EqualFold(ct[len(ct)-5:], []byte("+json")))
}

// Handle is the Fiber handler.
func (p *Passthrough) Handle(c *fiber.Ctx) error {
	ctx := c.UserContext()
	presented, unambiguous := presentedKey(c)
	if !unambiguous {
		return openAIError(c, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "",
			"Ambiguous credentials: send one AI key (one X-API-Key, or a Bearer token that is the same key)")
	}
	key, err := p.keys.Authenticate(ctx, presented)
	if err != nil {
		if errors.Is(err, httpx.ErrUnavailable) {
			return openAIError(c, http.StatusServiceUnavailable, "server_error", "unavailable", "", "Key check unavailable; try again")
		}
		return openAIError(c, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "", "Invalid, revoked or expired API key")
	}
	r, err := p.limiter.Enforce(ctx, "AiGenerate", strconv.FormatInt(key.KeyID, 10))
	if r.Limit > 0 {
		ratelimit.SetHeaders(c, r)
	}
	var le *ratelimit.LimitError
	if errors.As(err, &le) {
		c.Set(fiber.HeaderRetryAfter, le.GetHeaders().Get(fiber.HeaderRetryAfter)) // the limiter's rounding, as its message says
		return openAIError(c, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", "", le.Error())
	}
	if !p.upstream.Configured() {
		return openAIError(c, http.StatusServiceUnavailable, "server_error", "not_configured", "", "No AI upstream is configured (Ai:BaseUrl)")
	}
	if !jsonContentType(c.Request().Header.ContentType()) {
		return openAIError(c, http.StatusUnsupportedMediaType, "invalid_request_error", "unsupported_content_type", "",
			"Unsupported Content-Type: send application/json")
	}
	// json/v2 (one pass, several times faster than encoding/json here) refuses what the other
	// routes refuse: invalid UTF-8 and a member name given twice in any object. A NUL in a string
	// is valid JSON and relayed as it is.
	var body map[string]json.RawMessage
	if err := jsonv2.Unmarshal(c.Body(), &body); err != nil || body == nil {
		var se *jsontext.SyntacticError
		switch {
		case errors.As(err, &se) && errors.Is(se.Err, jsontext.ErrDuplicateName):
			return openAIError(c, http.StatusBadRequest, "invalid_request_error", "duplicate_member", "",
				"The body names a member twice in one object; name each once")
		case err != nil && strings.Contains(err.Error(), "invalid UTF-8"):
			return openAIError(c, http.StatusBadRequest, "invalid_request_error", "invalid_utf8", "", "The body must be valid UTF-8")
		}
		return openAIError(c, http.StatusBadRequest, "invalid_request_error", "invalid_json", "", "The body must be a JSON object")
	}
	msgs, ok := body["messages"]
	if code, msg := messagesError(msgs, ok); code != "" {
		return openAIError(c, http.StatusBadRequest, "invalid_request_error", code, "messages", msg)
	}
	for _, f := range [...]struct{ name, kind string }{{"stream", "a boolean"}, {"stream_options", "an object"}, {"model", "a string"}} {
		if v, ok := body[f.name]; ok && !jsonKindIs(v, f.kind) {
			return openAIError(c, http.StatusBadRequest, "invalid_request_error", "invalid_type", f.name,
				"Invalid type for '"+f.name+"': expected "+f.kind)
		}
	}
	if m, ok := body["model"]; !ok || string(m) == `""` || string(m) == "null" {
		body["model"], _ = json.Marshal(p.upstream.model)
	}
	stream := string(body["stream"]) == "true"
	wantUsage := false
	if stream {
		// Ask for the final usage chunk, so streamed answers are metered too; it is relayed
		// only to a client that asked for it.
		var opts map[string]any
		_ = json.Unmarshal(body["stream_options"], &opts)
		if opts == nil { // absent, null, or not an object
			opts = map[string]any{}
		}
		wantUsage = opts["include_usage"] == true
		opts["include_usage"] = true
		body["stream_options"], _ = json.Marshal(opts)
	}
	raw, _ := json.Marshal(body)
	promptEstimate := int64(len(msgs) / 4)

	if !stream {
		return p.relayAnswer(c, key.KeyID, raw)
	}
	return p.relayStream(c, key.KeyID, raw, promptEstimate, wantUsage)
}

// relayStream relays a streamed answer event by event. Ai:TimeoutSeconds bounds every wait for
// the upstream (for its answer to begin, then between two reads), not the whole stream: a long
// answer that keeps coming is relayed to its end. A stream the upstream stops sending (for that
// long) or breaks off ends with an OpenAI error event, so SDKs raise instead of taking a cut
// answer for a whole one. Our Ai:ApiKey is redacted from every line relayed.
func (p *Passthrough) relayStream(c *fiber.Ctx, keyID int64, raw []byte, promptEstimate int64, wantUsage bool) error {
	timeout := p.upstream.timeout
	uctx, cancel := context.WithCancel(context.Background())
	var timedOut atomic.Bool
	idle := time.AfterFunc(timeout, func() { timedOut.Store(true); cancel() })
	// Until the upstream's answer begins nothing is written to the client: a client that gives
	// up meanwhile is noticed by watching its connection (after clientCheckDelay), and the
	// upstream request is cancelled.
	var left atomic.Bool
	stopWatch := watchClient(c, func() { left.Store(true); cancel() })
	res, err := p.upstream.post(uctx, raw)
	stopWatch()
	if err != nil && left.Load() {
		idle.Stop()
		p.clientLeft(keyID)
		return openAIError(c, http.StatusBadGateway, "server_error", "client_gone", "", "The client left before the AI upstream answered")
	}
	if err != nil {
		idle.Stop()
		cancel()
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_unavailable", "", "The AI upstream did not answer")
	}
	if res.StatusCode != http.StatusOK {
		// Refused before streaming began: answered as a non-streamed answer is (sendAnswer).
		defer cancel()
		defer idle.Stop()
		defer res.Body.Close()
		// The timeout bounds each wait here too, not the whole read of a large error body.
		data, err := io.ReadAll(io.LimitReader(&idleReader{r: res.Body, t: idle, d: timeout}, maxAnswer+1))
		if err != nil {
			return openAIError(c, http.StatusBadGateway, "server_error", "upstream_cut", "", "The AI upstream's answer was cut")
		}
		if len(data) > maxAnswer {
			return openAIError(c, http.StatusBadGateway, "server_error", "upstream_too_large", "", "The AI upstream's answer was too large")
		}
		return p.sendAnswer(c, keyID, answer{status: res.StatusCode, contentType: res.Header.Get("Content-Type"),
			retryAfter: res.Header.Get(fiber.HeaderRetryAfter), body: data})
	}

	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt != "text/event-stream" {
		// A 200 that is not a stream (a server that ignores `stream`, a proxy's page): an SDK
		// reading events would find none and take it for an empty answer. Not relayed, not metered.
		idle.Stop()
		cancel()
		_ = res.Body.Close()
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_not_streaming", "", "The AI upstream answered without a stream")
	}
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store") // as every answer; SSE needs no more
	c.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer cancel()
		defer idle.Stop()
		defer res.Body.Close()
		var prompt, completion, deltas int64
		metered, done := false, false
		var gone atomic.Bool // the client went away: a write or flush to it failed
		// mu guards w, pending and wrote between the relay and the keep-alive.
		var mu sync.Mutex
		pending := false   // a line of an event not yet ended is written
		skipBlank := false // the event being skipped ends at the next blank line
		wrote := time.Now()
		// While the upstream is silent nothing is written, so nothing would notice a client
		// that left: every streamKeepAlive without a write, an SSE comment (ignored by SSE
		// clients and the OpenAI SDKs) is sent; when it cannot be, the upstream request is
		// cancelled at once instead of generating for nobody until Ai:TimeoutSeconds.
		every := time.Duration(streamKeepAlive.Load())
		stop, stopped := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(stopped)
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				mu.Lock()
				if !pending && time.Since(wrote) >= every-every/10 {
					_, _ = w.WriteString(": keep-alive\n\n")
					wrote = time.Now()
					if w.Flush() != nil {
						gone.Store(true)
						mu.Unlock()
						cancel()
						return
					}
				}
				mu.Unlock()
			}
		}()
		sc := bufio.NewScanner(&idleReader{r: res.Body, t: idle, d: timeout})
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if skipBlank {
				skipBlank = len(line) != 0
				continue
			}
			if data, ok := sseData(line); ok {
				if bytes.Equal(data, []byte("[DONE]")) {
					done = true
				} else {
					var cr chatResponse
					var te *json.UnmarshalTypeError
					if err := json.Unmarshal(data, &cr); err == nil || errors.As(err, &te) { // a field of another type is skipped
						for _, ch := range cr.Choices {
							if ch.Delta.Content != "" {
								deltas++
							}
						}
						if cr.Usage != nil {
							prompt, completion, metered = int64(cr.Usage.PromptTokens), int64(cr.Usage.CompletionTokens), true
							if !wantUsage {
								if len(cr.Choices) == 0 {
									// The usage-only chunk we asked for, not the client: metered, not relayed.
									skipBlank = true
									continue
								}
								// Usage on a content chunk (some servers do that): the chunk without it.
								line = withoutUsage(line, data)
							}
						}
					}
				}
			}
			// Any line may quote our Ai:ApiKey (an error event quoting the Authorization it
			// got): redacted, as it is or JSON-escaped. A line is whole here, however the
			// upstream's writes cut it, and the key (an HTTP header's value) has no line break.
			mu.Lock()
			_, _ = w.Write(p.upstream.secret.Redact(line))
			err := w.WriteByte('\n')
			pending = len(line) != 0
			if !pending && err == nil { // end of one event: send it now
				err = w.Flush()
				wrote = time.Now()
			}
			mu.Unlock()
			if err != nil || gone.Load() { // the client went away (bufio's errors stick)
				gone.Store(true)
				cancel()
				break
			}
		}
		close(stop) // no keep-alive after the end
		<-stopped
		if err := sc.Err(); err != nil && !gone.Load() && !done {
			code, msg := "upstream_cut", "The AI upstream's stream broke off"
			switch {
			case timedOut.Load():
				code, msg = "upstream_timeout", fmt.Sprintf("The AI upstream sent nothing for %s", timeout)
			case errors.Is(err, bufio.ErrTooLong):
				code, msg = "upstream_too_large", "The AI upstream sent a line over 4 MiB"
			}
			if p.log != nil {
				p.log.Warn("AI stream cut", "keyId", keyID, "code", code, "error", err.Error())
			}
			if pending {
				_ = w.WriteByte('\n')
			}
			ev, _ := json.Marshal(openAIErrorBody("server_error", code, "", msg))
			_, _ = w.WriteString("data: ")
			_, _ = w.Write(ev)
			_, _ = w.WriteString("\n\n")
		}
		_ = w.Flush()
		if !metered {
			// Disconnected, cancelled (or no usage chunk): charge what the upstream generated
			// up to then, estimating one token per content delta read and the prompt from its size.
			prompt, completion = promptEstimate, deltas
		}
		p.meter.Add(keyID, prompt, completion)
	})
	return nil
}

// dropLimitHeaders takes our rate-limit headers (ratelimit.WriteHeaders') off the answer.
func dropLimitHeaders(c *fiber.Ctx) {
	for _, h := range ratelimit.HeaderNames {
		c.Response().Header.Del(h)
	}
}

// streamKeepAlive is how long a stream may go without a write to the client before an SSE
// comment is sent to find out whether the client is still there (in nanoseconds; tests shorten it).
var streamKeepAlive atomic.Int64

func init() { streamKeepAlive.Store(int64(5 * time.Second)) }

// sseData answers the value of a server-sent event's data line: what follows "data:" and the one
// space the SSE format allows there, which some OpenAI-compatible servers do not write ("data:{…}").
func sseData(line []byte) ([]byte, bool) {
	data, ok := bytes.CutPrefix(line, []byte("data:"))
	if ok {
		data = bytes.TrimPrefix(data, []byte(" "))
	}
	return data, ok
}

// withoutUsage returns the event line "data: <data>" with the chunk's usage member removed, or
// line itself when data cannot be rewritten.
func withoutUsage(line, data []byte) []byte {
	var chunk map[string]json.RawMessage
	if json.Unmarshal(data, &chunk) != nil {
		return line
	}
	delete(chunk, "usage")
	out, err := json.Marshal(chunk)
	if err != nil {
		return line
	}
	return append([]byte("data: "), out...)
}

// idleReader arms t for d around every read of r: a read that waits longer fires it (which cancels
// the upstream request). Time spent writing to a slow client does not count.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (r *idleReader) Read(b []byte) (int, error) {
	r.t.Reset(r.d)
	n, err := r.r.Read(b)
	r.t.Stop()
	return n, err
}

// clientLeft logs a call abandoned because its client left before the upstream answered.
func (p *Passthrough) clientLeft(keyID int64) {
	if p.log != nil {
		p.log.Info("AI call cancelled: the client left before the upstream answered", "keyId", keyID)
	}
}

// relayAnswer sends a non-streamed request with the pooled fasthttp client (no per-connection
// goroutines, as for /api/ai/generate) and relays the answer.
func (p *Passthrough) relayAnswer(c *fiber.Ctx, keyID int64, raw []byte) error {
	a, err := p.upstream.postFast(c, raw)
	if errors.Is(err, errAnswerTooLarge) {
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_too_large", "", "The AI upstream's answer was too large")
	}
	if errors.Is(err, errClientGone) {
		p.clientLeft(keyID)
		return openAIError(c, http.StatusBadGateway, "server_error", "client_gone", "", "The client left before the AI upstream answered")
	}
	if err != nil {
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_unavailable", "", "The AI upstream did not answer")
	}
	return p.sendAnswer(c, keyID, a)
}

// maxRelayedMessage bounds the upstream's message in a relayed error, in runes.
const maxRelayedMessage = 2000

// sendAnswer relays a whole upstream answer; what reaches the client is one of the statuses the
// route documents, and every error is OpenAI's {error: {message, type, param, code}} as JSON:
//   - 200 with a JSON object: relayed (our Ai:ApiKey redacted) and metered, the only answer that is;
//   - 429: relayed, with the upstream's Retry-After (1 when it gave none) and not our rate-limit headers;
//   - 400, 404, 409, 413, 422 (refusedInput: the client's own request refused) with a JSON error: relayed;
//   - 408 (the upstream timed out): 502 upstream_timeout, as when it does not answer in time;
//   - anything else (1xx, 3xx such as a wrong Ai:BaseUrl's http→https redirect, a 2xx other than
//     200, 401/403/407 refusing our credentials, any other 4xx, a 4xx that is no JSON error, 5xx):
//     502 upstream_error.
//
// A relayed error keeps the upstream's message, type, param and code when present and of the
// right type (strings; param and code may be null), the message on one line, at most
// maxRelayedMessage runes, without control or bidi characters and with Ai:ApiKey redacted.
func (p *Passthrough) sendAnswer(c *fiber.Ctx, keyID int64, a answer) error {
	switch {
	case a.status == http.StatusOK:
		// A 200 that is no JSON object (a proxy's or a captive portal's HTML page, a cut body) is
		// no completion: an SDK would fail to parse it. Not relayed, not metered.
		// Any JSON object is relayed: only its usage is read (usageFigures: sanitised, a usage
		// that cannot be read counts 0 tokens), whatever the rest holds.
		var cr struct {
			Usage usageFigures `json:"usage"`
		}
		if v := bytes.TrimSpace(a.body); len(v) == 0 || v[0] != '{' || json.Unmarshal(a.body, &cr) != nil {
			return openAIError(c, http.StatusBadGateway, "server_error", "upstream_malformed", "", "The AI upstream's answer was not a JSON completion")
		}
		p.meter.Add(keyID, int64(cr.Usage.PromptTokens), int64(cr.Usage.CompletionTokens))
		// The answer is relayed as the upstream wrote it, except our Ai:ApiKey, as it is or
		// JSON-escaped (`\/`, `\u002d`...).
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Status(http.StatusOK).Send(p.upstream.secret.Redact(a.body))
	case a.status == http.StatusTooManyRequests:
		// The upstream's own limit: our per-key X-RateLimit-*/RateLimit headers (this key may
		// well have requests left here) would contradict its Retry-After. Only the upstream's
		// signal goes out.
		dropLimitHeaders(c)
		c.Set(fiber.HeaderRetryAfter, upstreamRetryAfter(a.retryAfter))
		return p.relayError(c, a, "requests", "The AI upstream is rate limiting; retry later")
	case a.status == http.StatusRequestTimeout:
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_timeout", "", "The AI upstream timed out (408)")
	case refusedInput(a.status):
		if _, ok := parseUpstreamError(a.body); ok {
			return p.relayError(c, a, "invalid_request_error", fmt.Sprintf("The AI upstream refused the request (%d)", a.status))
		}
	}
	msg := fmt.Sprintf("The AI upstream answered %d", a.status)
	if a.status >= 300 && a.status < 400 {
		msg += " (a redirect: check Ai:BaseUrl)"
	}
	return openAIError(c, http.StatusBadGateway, "server_error", "upstream_error", "", msg)
}

// relayError answers the upstream's error status with its error in OpenAI's format (see
// sendAnswer); typ and msg stand for what the upstream did not say.
func (p *Passthrough) relayError(c *fiber.Ctx, a answer, typ, msg string) error {
	e, _ := parseUpstreamError(a.body)
	if said := p.upstream.sanitize(e.Message, maxRelayedMessage); said != "" {
		msg = said
	}
	str := func(v any) any { // a non-empty string, sanitized, or null
		if s, ok := v.(string); ok {
			if s = p.upstream.sanitize(s, 200); s != "" {
				return s
			}
		}
		return nil
	}
	if t, ok := str(e.Type).(string); ok {
		typ = t
	}
	return c.Status(a.status).JSON(fiber.Map{"error": fiber.Map{"message": msg, "type": typ, "param": str(e.Param), "code": str(e.Code)}})
}
