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
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"provisioner/platform/httpx"
	"provisioner/platform/ratelimit"
)

// Upstream calls the OpenAI-compatible generation service: fasthttp's client for plain answers
// (no per-connection goroutines on the hot path), net/http for streams.
type Upstream struct {
	base, key, model string
	timeout          time.Duration
	http             *http.Client
	fast             *fasthttp.Client
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
	fast := &fasthttp.Client{MaxConnsPerHost: 512, MaxIdleConnDuration: idleConnTimeout, ReadTimeout: timeout,
		WriteTimeout: timeout, NoDefaultUserAgentHeader: true, MaxResponseBodySize: maxAnswer,
		// The most recently used connection first: the least likely to have been closed, and
		// the ones beyond the working set go idle and are dropped.
		ConnPoolStrategy: fasthttp.LIFO,
		DialTimeout:      dialStale, Transport: retryStale{},
		MaxIdemponentCallAttempts: 2, // at most one retry, and only when retryStale says so
		RetryIfErr:                func(*fasthttp.Request, int, error) (bool, bool) { return false, true },
	}
	return &Upstream{base: strings.TrimRight(base, "/"), key: key, model: model, timeout: timeout, http: &http.Client{Transport: tr}, fast: fast}
}

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
func (u *Upstream) postFast(body []byte) (answer, error) {
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
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
		return answer{}, err
	}
	return answer{status: res.StatusCode(), contentType: string(res.Header.ContentType()),
		retryAfter: string(res.Header.Peek(fiber.HeaderRetryAfter)), body: append([]byte(nil), res.Body()...)}, nil
}

// Configured reports whether an upstream is set.
func (u *Upstream) Configured() bool { return u.base != "" }

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
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

// Generate runs one chat completion for a prompt.
func (u *Upstream) Generate(ctx context.Context, in GenerateInput) (*Generation, error) {
	model := in.Model
	if model == "" {
		model = u.model
	}
	type message struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}
	req := struct {
		Model       string    `json:"model"`
		Messages    []message `json:"messages"`
		MaxTokens   *int      `json:"max_tokens,omitempty"`
		Temperature *float64  `json:"temperature,omitempty"`
	}{Model: model, Messages: make([]message, 0, 2), MaxTokens: in.MaxTokens, Temperature: in.Temperature}
	if in.System != "" {
		req.Messages = append(req.Messages, message{Role: "system", Content: in.System})
	}
	req.Messages = append(req.Messages, message{Role: "user", Content: in.Prompt})
	body, _ := json.Marshal(req)
	a, err := u.postFast(body)
	if errors.Is(err, errAnswerTooLarge) {
		return nil, upstreamError("the AI upstream's answer was too large", nil)
	}
	if err != nil {
		return nil, upstreamError("the AI upstream did not answer", nil)
	}
	if a.status != http.StatusOK {
		return nil, upstreamError(fmt.Sprintf("the AI upstream answered %d", a.status), nil)
	}
	var cr chatResponse
	if err := json.Unmarshal(a.body, &cr); err != nil || len(cr.Choices) == 0 {
		return nil, upstreamError("the AI upstream's answer was malformed", nil)
	}
	g := &Generation{Text: cr.Choices[0].Message.Content, Model: cr.Model, FinishReason: cr.Choices[0].FinishReason}
	if g.Model == "" {
		g.Model = model
	}
	if cr.Usage != nil {
		g.Usage = TokenUsage{PromptTokens: cr.Usage.PromptTokens, CompletionTokens: cr.Usage.CompletionTokens, TotalTokens: cr.Usage.TotalTokens}
	}
	return g, nil
}

func upstreamError(msg string, data any) error { return httpx.BadGateway(msg, data) }

// Passthrough serves POST /api/ai/v1/chat/completions: an OpenAI-compatible relay. Errors are in
// OpenAI's format ({error: {message, type, code}}) so OpenAI SDKs understand them.
type Passthrough struct {
	keys     *Keys
	upstream *Upstream
	meter    *Meter
	limiter  *ratelimit.Limiter
	log      *slog.Logger
}

func openAIError(c *fiber.Ctx, status int, typ, code, msg string) error {
	return c.Status(status).JSON(fiber.Map{"error": fiber.Map{"message": msg, "type": typ, "code": code}})
}

// presentedKey reads X-API-Key, or Authorization: Bearer (what OpenAI SDKs send).
func presentedKey(c *fiber.Ctx) string {
	if k := c.Get("X-API-Key"); k != "" {
		return k
	}
	if a := c.Get(fiber.HeaderAuthorization); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// Handle is the Fiber handler.
func (p *Passthrough) Handle(c *fiber.Ctx) error {
	ctx := c.UserContext()
	key, err := p.keys.Authenticate(ctx, presentedKey(c))
	if err != nil {
		if errors.Is(err, httpx.ErrUnavailable) {
			return openAIError(c, http.StatusServiceUnavailable, "server_error", "unavailable", "Key check unavailable; try again")
		}
		return openAIError(c, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key", "Invalid, revoked or expired API key")
	}
	r, err := p.limiter.Enforce(ctx, "AiGenerate", strconv.FormatInt(key.KeyID, 10))
	if r.Limit > 0 {
		ratelimit.SetHeaders(c, r)
	}
	var le *ratelimit.LimitError
	if errors.As(err, &le) {
		c.Set(fiber.HeaderRetryAfter, fmt.Sprint(int(le.RetryAfter.Seconds())+1))
		return openAIError(c, http.StatusTooManyRequests, "requests", "rate_limit_exceeded", le.Error())
	}
	if !p.upstream.Configured() {
		return openAIError(c, http.StatusServiceUnavailable, "server_error", "not_configured", "No AI upstream is configured (Ai:BaseUrl)")
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(c.Body(), &body); err != nil {
		return openAIError(c, http.StatusBadRequest, "invalid_request_error", "invalid_json", "The body must be a JSON object")
	}
	if _, ok := body["messages"]; !ok {
		return openAIError(c, http.StatusBadRequest, "invalid_request_error", "missing_messages", "messages is required")
	}
	if m, ok := body["model"]; !ok || string(m) == `""` || string(m) == "null" {
		body["model"], _ = json.Marshal(p.upstream.model)
	}
	stream := string(body["stream"]) == "true"
	if stream {
		// Ask for the final usage chunk, so streamed answers are metered too.
		opts := map[string]any{}
		_ = json.Unmarshal(body["stream_options"], &opts)
		opts["include_usage"] = true
		body["stream_options"], _ = json.Marshal(opts)
	}
	raw, _ := json.Marshal(body)
	promptEstimate := int64(len(body["messages"]) / 4)

	if !stream {
		return p.relayAnswer(c, key.KeyID, raw)
	}
	uctx, cancel := context.WithTimeout(context.Background(), p.upstream.timeout)
	res, err := p.upstream.post(uctx, raw)
	if err != nil {
		cancel()
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_unavailable", "The AI upstream did not answer")
	}
	if res.StatusCode != http.StatusOK {
		// Refused before streaming began: relay the upstream's error as it is.
		defer cancel()
		defer res.Body.Close()
		data, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer+1))
		if err != nil {
			return openAIError(c, http.StatusBadGateway, "server_error", "upstream_cut", "The AI upstream's answer was cut")
		}
		if len(data) > maxAnswer {
			return openAIError(c, http.StatusBadGateway, "server_error", "upstream_too_large", "The AI upstream's answer was too large")
		}
		return p.sendAnswer(c, key.KeyID, answer{status: res.StatusCode, contentType: res.Header.Get("Content-Type"),
			retryAfter: res.Header.Get(fiber.HeaderRetryAfter), body: data})
	}

	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	keyID := key.KeyID
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer cancel()
		defer res.Body.Close()
		var prompt, completion, deltas int64
		metered := false
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && !bytes.Equal(data, []byte("[DONE]")) {
				var cr chatResponse
				if json.Unmarshal(data, &cr) == nil {
					for _, ch := range cr.Choices {
						if ch.Delta.Content != "" {
							deltas++
						}
					}
					if cr.Usage != nil {
						prompt, completion, metered = cr.Usage.PromptTokens, cr.Usage.CompletionTokens, true
					}
				}
			}
			_, _ = w.Write(line)
			_ = w.WriteByte('\n')
			if len(line) == 0 { // end of one event: send it now
				if err := w.Flush(); err != nil {
					break // the client went away
				}
			}
		}
		_ = w.Flush()
		if !metered {
			// Disconnected (or no usage chunk): charge what was generated, estimating one
			// token per content delta and the prompt from its size.
			prompt, completion = promptEstimate, deltas
		}
		p.meter.Add(keyID, prompt, completion)
	})
	return nil
}

// relayAnswer sends a non-streamed request with the pooled fasthttp client (no per-connection
// goroutines, as for /api/ai/generate) and relays the answer.
func (p *Passthrough) relayAnswer(c *fiber.Ctx, keyID int64, raw []byte) error {
	a, err := p.upstream.postFast(raw)
	if errors.Is(err, errAnswerTooLarge) {
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_too_large", "The AI upstream's answer was too large")
	}
	if err != nil {
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_unavailable", "The AI upstream did not answer")
	}
	return p.sendAnswer(c, keyID, a)
}

// sendAnswer relays a whole upstream answer. A 5xx becomes 502; so does a 401 or 403, which
// refuses the gateway's own credentials (Ai:ApiKey), not the client's, and may quote them. Anything
// else (the answer, or the upstream's 4xx in OpenAI's format, with its Retry-After) goes through
// as it is. Every answer is metered.
func (p *Passthrough) sendAnswer(c *fiber.Ctx, keyID int64, a answer) error {
	if a.status >= 500 || a.status == http.StatusUnauthorized || a.status == http.StatusForbidden {
		return openAIError(c, http.StatusBadGateway, "server_error", "upstream_error", fmt.Sprintf("The AI upstream answered %d", a.status))
	}
	if a.retryAfter != "" {
		c.Set(fiber.HeaderRetryAfter, a.retryAfter)
	}
	var cr chatResponse
	if a.status == http.StatusOK && json.Unmarshal(a.body, &cr) == nil && cr.Usage != nil {
		p.meter.Add(keyID, cr.Usage.PromptTokens, cr.Usage.CompletionTokens)
	} else {
		p.meter.Add(keyID, 0, 0)
	}
	if a.contentType != "" {
		c.Set(fiber.HeaderContentType, a.contentType)
	}
	return c.Status(a.status).Send(a.body)
}
