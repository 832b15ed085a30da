package aikeys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"provisioner/platform/displaytext"
	"provisioner/platform/httpx"
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

// Generate runs one chat completion for a prompt; c is the request's (its client is watched: see
// postFast), or nil.
// user is the upstream's `user` field.
func (u *Upstream) Generate(c *fiber.Ctx, in GenerateInput, user string) (*Generation, error) {
	model := in.Model
	if model == "" {
		model = u.model
	}
	body := appendChatRequest(make([]byte, 0, 144+len(model)+len(user)+len(in.System)+len(in.Prompt)), model, user, in)
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
		if displaytext.Deceptive(r) {
			return ' '
		}
		return r
	}, s)), " ")
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}
