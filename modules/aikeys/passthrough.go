package aikeys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/gofiber/fiber/v2"

	"provisioner/platform/httpx"
	"provisioner/platform/ratelimit"
)

// Passthrough serves POST /api/ai/v1/chat/completions: an OpenAI-compatible relay. Errors are in
// OpenAI's format ({error: {message, type, code}}) so OpenAI SDKs understand them.
type Passthrough struct {
	keys     *Keys
	caps     *Caps
	budgets  *Budgets
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
	completion, refused := p.applyCaps(c, key, body)
	if refused != nil {
		p.meter.Refused(key.KeyID)
		return openAIError(c, http.StatusBadRequest, "invalid_request_error", refused.code, refused.param, refused.msg)
	}
	held, err := p.budgets.Reserve(ctx, key, promptEstimate(len(msgs))+completion)
	if err != nil {
		p.meter.Refused(key.KeyID)
		e := httpx.FromError(err)
		for h, v := range e.GetHeaders() {
			c.Set(h, v[0])
		}
		if e.Status == http.StatusTooManyRequests {
			return openAIError(c, e.Status, "requests", "budget_exceeded", "", e.Message)
		}
		return openAIError(c, http.StatusServiceUnavailable, "server_error", "unavailable", "", e.Message)
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
	promptGuess := int64(len(msgs) / 4) // charged for a stream cut before its usage came

	if !stream {
		return p.relayAnswer(c, key.KeyID, held, raw)
	}
	return p.relayStream(c, key.KeyID, held, raw, promptGuess, wantUsage)
}

// relayAnswer sends a non-streamed request with the pooled fasthttp client (no per-connection
// goroutines, as for /api/ai/generate) and relays the answer.
func (p *Passthrough) relayAnswer(c *fiber.Ctx, keyID int64, held *hold, raw []byte) error {
	a, err := p.upstream.postFast(c, raw)
	if err != nil {
		held.release()
	}
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
	return p.sendAnswer(c, keyID, held, a)
}

// maxRelayedMessage bounds the upstream's message in a relayed error, in runes.
const maxRelayedMessage = 2000

// sendAnswer relays a whole upstream answer as one of the statuses the route documents, errors in
// OpenAI's format: a 200 JSON object is relayed (Ai:ApiKey redacted), metered and settles held; a
// 429 keeps the upstream's Retry-After; 400, 404, 409, 413 and 422 with a JSON error are relayed
// (message on one line, bounded, redacted); 408 is a 502 upstream_timeout; anything else is a 502
// upstream_error. Every answer but the 200 releases held.
func (p *Passthrough) sendAnswer(c *fiber.Ctx, keyID int64, held *hold, a answer) error {
	if a.status != http.StatusOK {
		held.release()
	}
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
			held.release()
			return openAIError(c, http.StatusBadGateway, "server_error", "upstream_malformed", "", "The AI upstream's answer was not a JSON completion")
		}
		held.settle(int64(cr.Usage.PromptTokens) + int64(cr.Usage.CompletionTokens))
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

// capRefusal is a request applyCaps refuses: a 400 with OpenAI's code and the param at fault.
type capRefusal struct{ code, param, msg string }

// applyCaps holds a request's body to the caps (Caps) for key: the model (Ai:DefaultModel when
// none) must be allowed, `n` at most Ai:MaxChoices, max_tokens and max_completion_tokens are
// capped (max_tokens set to the cap when neither is given, maxTokensHeader saying what was sent)
// and `user` is the key's owner. It answers the completion tokens the request may use at most
// (for all its choices), or what it refuses.
func (p *Passthrough) applyCaps(c *fiber.Ctx, key Principal, body map[string]json.RawMessage) (int64, *capRefusal) {
	var requested string
	_ = json.Unmarshal(body["model"], &requested) // a string or null (checked above)
	model, err := p.caps.Model(key, requested)
	if err != nil {
		return 0, &capRefusal{"model_not_allowed", "model", "The model is not allowed: " + err.Error()}
	}
	body["model"], _ = json.Marshal(model)
	choices := int64(1)
	if v, ok := body["n"]; ok && string(v) != "null" {
		n, whole := wholeNumber(v)
		if !whole {
			return 0, &capRefusal{"invalid_type", "n", "Invalid 'n': expected an integer of at least 1"}
		}
		if n > p.caps.maxChoices {
			return 0, &capRefusal{"too_many_choices", "n", fmt.Sprintf("Invalid 'n': at most %d choices per request (Ai:MaxChoices)", p.caps.maxChoices)}
		}
		choices = n
	}
	sent := int64(0)
	for _, name := range [...]string{"max_tokens", "max_completion_tokens"} {
		v, ok := body[name]
		if !ok || string(v) == "null" {
			continue
		}
		n, whole := wholeNumber(v)
		if !whole {
			return 0, &capRefusal{"invalid_type", name, "Invalid '" + name + "': expected an integer of at least 1"}
		}
		n = p.caps.Tokens(key, n)
		sent = max(sent, n)
		body[name] = strconv.AppendInt(nil, n, 10)
	}
	if sent == 0 {
		sent = p.caps.MaxTokens(key)
		body["max_tokens"] = strconv.AppendInt(nil, sent, 10)
	}
	c.Set(maxTokensHeader, strconv.FormatInt(sent, 10))
	body["user"], _ = json.Marshal(userField(key))
	return sent * choices, nil
}
