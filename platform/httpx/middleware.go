package httpx

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"mime"
	"net/netip"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"provisioner/platform/config"
	"provisioner/platform/ratelimit"
	"provisioner/platform/reqctx"
)

// ctxKey names the request's values in Fiber's Locals (for Fiber handlers); huma handlers and the
// packages below read them from the context (platform/reqctx).
type ctxKey string

const (
	requestIDKey ctxKey = "requestId"
	clientIPKey  ctxKey = "clientIp"
	clientKeyKey ctxKey = "clientKey"
	userAgentKey ctxKey = "userAgent"
)

// FiberCtx returns the Fiber context of the request ctx belongs to, or nil outside a request. It
// must not be kept beyond the request.
func FiberCtx(ctx context.Context) *fiber.Ctx { return reqctx.Fiber(ctx) }

// RequestID returns the request id of the request ctx belongs to, or "".
func RequestID(ctx context.Context) string { return reqctx.RequestID(ctx) }

// ClientIP returns the client address of the request ctx belongs to: the socket peer, or the
// nearest untrusted address of X-Forwarded-For when the peer is a trusted proxy.
func ClientIP(ctx context.Context) string { return reqctx.ClientIP(ctx) }

// ClientKey returns the key every per-IP limit of the request ctx belongs to counts under: the
// client address, or for an IPv6 client its prefix of Server:Ipv6LimitPrefix bits.
func ClientKey(ctx context.Context) string { return reqctx.ClientKey(ctx) }

// FiberClientKey is ClientKey for Fiber handlers.
func FiberClientKey(c *fiber.Ctx) string {
	if s, ok := c.Locals(clientKeyKey).(string); ok {
		return s
	}
	return ratelimit.ClientKey(FiberClientIP(c), ratelimit.DefaultIPv6Prefix)
}

// UserAgent returns the User-Agent of the request ctx belongs to.
func UserAgent(ctx context.Context) string { return reqctx.UserAgent(ctx) }

// FiberClientIP is ClientIP for Fiber handlers.
func FiberClientIP(c *fiber.Ctx) string {
	if s, ok := c.Locals(clientIPKey).(string); ok {
		return s
	}
	return c.Context().RemoteIP().String()
}

// requestContext stores the request id, client IP and user agent where both Fiber handlers
// (Locals) and huma handlers (context values) can read them, and echoes X-Request-Id. A URL whose
// path or query holds a NUL character (%00) is refused here, for every route.
func requestContext(trusted []netip.Prefix, ipv6Prefix int) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id := requestID(c)
		c.Set(fiber.HeaderXRequestID, id)
		ip := clientIP(c, trusted)
		key := ratelimit.ClientKey(ip, ipv6Prefix)
		ua := c.Get(fiber.HeaderUserAgent)
		if len(ua) > 512 {
			ua = ua[:512]
		}
		c.Locals(requestIDKey, id)
		c.Locals(clientIPKey, ip)
		c.Locals(clientKeyKey, key)
		c.Locals(userAgentKey, ua)
		c.SetUserContext(reqctx.WithRequest(c.UserContext(), reqctx.Request{ID: id, ClientIP: ip, ClientKey: key, UserAgent: ua, Fiber: c}))
		if uri := c.Request().RequestURI(); bytes.Contains(uri, []byte("%00")) || bytes.IndexByte(uri, 0) >= 0 {
			// Decoded, it would reach handlers and PostgreSQL, whose text cannot hold a NUL.
			return BadRequest("The URL must not contain NUL characters (%00)")
		}
		return c.Next()
	}
}

// requestID is the request's X-Request-Id when it is one (1 to 128 visible ASCII characters),
// else a new one.
func requestID(c *fiber.Ctx) string {
	id := c.Get(fiber.HeaderXRequestID)
	if id == "" || len(id) > 128 || strings.ContainsFunc(id, func(r rune) bool { return r < 0x21 || r > 0x7e }) {
		id = newRequestID()
	}
	return id
}

// setStaticHeaders sets the headers of responseHeaders that every answer carries.
func setStaticHeaders(h *fasthttp.ResponseHeader) {
	h.Set(fiber.HeaderCacheControl, "no-store")
	h.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	h.Set(fiber.HeaderReferrerPolicy, "no-referrer")
}

// responseHeaders sets the headers every answer carries, before the route runs so a route may
// override them: Cache-Control: no-store (answers carry tokens, passwords and keys, and none may be
// kept by a browser or a proxy; the docs assets set their own max-age, the OpenAPI document
// no-cache, see serveDocument), X-Content-Type-Options:
// nosniff (JSON is never sniffed as HTML) and Referrer-Policy: no-referrer. It also writes a
// request's Content-Type in canonical form (RFC 9110: type, subtype and parameter names are
// case-insensitive), so Application/JSON; Charset=UTF-8 is JSON like application/json.
func responseHeaders(c *fiber.Ctx) error {
	setStaticHeaders(&c.Response().Header)
	if ct := c.Get(fiber.HeaderContentType); ct != "" && ct != fiber.MIMEApplicationJSON && ct != fiber.MIMEApplicationJSONCharsetUTF8 {
		// (The two usual forms are canonical already: no parsing on the hot path.)
		if mt, params, err := mime.ParseMediaType(ct); err == nil {
			if canon := mime.FormatMediaType(mt, params); canon != "" {
				c.Request().Header.SetContentType(canon)
			}
		}
	}
	return c.Next()
}

// identityBodies refuses (415, with Accept-Encoding: identity) a request whose Content-Encoding is
// anything but identity, in any coding of any such header, or whose Content-Type declares a charset
// other than UTF-8, before any handler runs: Fiber would inflate a compressed body without bound
// past BodyLimit. A request without a body is let through.
func identityBodies(c *fiber.Ctx) error {
	if len(c.Request().Body()) == 0 {
		return c.Next()
	}
	var refused string
	c.Request().Header.VisitAll(func(k, v []byte) {
		if refused != "" || !strings.EqualFold(string(k), fiber.HeaderContentEncoding) {
			return
		}
		for _, coding := range strings.Split(string(v), ",") {
			if coding = strings.TrimSpace(coding); coding != "" && !strings.EqualFold(coding, "identity") {
				refused = coding
				return
			}
		}
	})
	if refused == "" {
		if cs := bodyCharset(c); cs != "" {
			return wrap(fiber.StatusUnsupportedMediaType,
				fmt.Sprintf("Unsupported charset %q: request bodies are read as UTF-8 (RFC 8259)", cs), ErrCharset)
		}
		return c.Next()
	}
	c.Set(fiber.HeaderAcceptEncoding, "identity")
	if len(refused) > 32 {
		refused = refused[:32] + "…"
	}
	return NewError(fiber.StatusUnsupportedMediaType,
		fmt.Sprintf("Unsupported Content-Encoding %q: send the body uncompressed", refused))
}

// bodyCharset is the charset a request body declares when it is not UTF-8 (or US-ASCII, a subset
// of it), else "". Every body is read as UTF-8, as RFC 8259 requires of JSON: a UTF-16 or Latin-1
// body would otherwise be misread, or refused with a parse error that does not say why.
func bodyCharset(c *fiber.Ctx) string {
	ct := c.Get(fiber.HeaderContentType)
	if !strings.Contains(ct, "=") { // no parameters: the common case costs no parse
		return ""
	}
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	cs, ok := params["charset"]
	if !ok {
		return ""
	}
	switch strings.ToLower(strings.TrimSpace(cs)) {
	case "utf-8", "utf8", "us-ascii":
		return ""
	}
	if len(cs) > 32 {
		cs = cs[:32] + "…"
	}
	return cs
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// clientIP believes X-Forwarded-For only when the socket peer is a trusted proxy, and then takes
// the rightmost address that is not itself a trusted proxy (the leftmost is client-controlled).
func clientIP(c *fiber.Ctx, trusted []netip.Prefix) string {
	peer, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return c.Context().RemoteIP().String()
	}
	peer = peer.Unmap()
	if len(trusted) == 0 || !inPrefixes(peer, trusted) {
		return peer.String()
	}
	parts := strings.Split(c.Get(fiber.HeaderXForwardedFor), ",")
	for i := len(parts) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(parts[i]))
		if err != nil {
			break
		}
		a = a.Unmap()
		if !inPrefixes(a, trusted) {
			return a.String()
		}
	}
	return peer.String()
}

func inPrefixes(a netip.Addr, ps []netip.Prefix) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ParseTrustedProxies reads Server:TrustedProxies (config.TrustedProxy: addresses or CIDR prefixes;
// empty entries skipped).
func ParseTrustedProxies(in []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range in {
		p, ok := config.TrustedProxy(s)
		if !ok {
			return nil, fmt.Errorf("trusted proxy %q: not an IP address or CIDR prefix", s)
		}
		if p.IsValid() {
			out = append(out, p)
		}
	}
	return out, nil
}

// recoverer turns a panic into a 500 envelope and logs the stack (never sent to the client).
func recoverer(log *slog.Logger) fiber.Handler {
	return func(c *fiber.Ctx) (err error) {
		defer func() {
			if r := recover(); r != nil {
				log.Error("panic", "requestId", c.Locals(requestIDKey), "panic", fmt.Sprint(r),
					"stack", string(debug.Stack()))
				err = NewError(fiber.StatusInternalServerError, "An unexpected error occurred")
			}
		}()
		return c.Next()
	}
}

// Metrics are the HTTP metrics exposed on /metrics.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the HTTP metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total", Help: "HTTP requests by method, route and status.",
		}, []string{"method", "route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "http_request_duration_seconds", Help: "HTTP request latency by method and route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.latency)
	return m
}

// accessLog writes one JSON line per request and records the metrics. The query string is not
// logged: it may carry OAuth codes or states.
//
// Label values must not be c.Method() itself: it points into fasthttp's request buffer, which the
// next request on the connection overwrites, while Prometheus keeps the string.
func accessLog(log *slog.Logger, m *Metrics, errorHandler fiber.ErrorHandler) fiber.Handler {
	return func(c *fiber.Ctx) error {
		start := time.Now()
		err := c.Next()
		if err != nil {
			// Write the error now so the status below is the one the client gets.
			if herr := errorHandler(c, err); herr != nil {
				c.Status(fiber.StatusInternalServerError)
			}
			err = nil
		}
		status := c.Response().StatusCode()
		route := "unmatched"
		if r := c.Route(); r != nil && r.Path != "/" && !strings.HasSuffix(r.Path, "*") {
			route = r.Path
		}
		d := time.Since(start)
		if m != nil {
			method := methodLabel(c.Method())
			m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
			m.latency.WithLabelValues(method, route).Observe(d.Seconds())
		}
		if Probe(route) {
			return nil
		}
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		if !log.Enabled(c.UserContext(), level) {
			return nil
		}
		log.LogAttrs(c.UserContext(), level, "request",
			slog.String("requestId", fmt.Sprint(c.Locals(requestIDKey))),
			slog.String("method", c.Method()),
			slog.String("path", c.Path()),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Float64("durationMs", float64(d.Microseconds())/1000),
			slog.String("ip", fmt.Sprint(c.Locals(clientIPKey))),
		)
		return nil
	}
}

// methodLabels are the request methods with a metrics label of their own.
var methodLabels = [...]string{fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut,
	fiber.MethodPatch, fiber.MethodDelete, fiber.MethodOptions}

// methodLabel is the metrics label of a request method: one of methodLabels, a constant (never a
// string backed by fasthttp's reused buffer), or "other", which also bounds the label's values.
func methodLabel(m string) string {
	for _, l := range methodLabels {
		if m == l {
			return l
		}
	}
	return "other"
}

// Probe reports whether path is one of the operational endpoints a load balancer or scraper
// polls (/healthz, /readyz, /metrics): they are not logged per request, and no rate limit counts
// them (so none answers 429).
func Probe(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}
