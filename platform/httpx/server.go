// Package httpx is the HTTP platform: one Fiber app, one huma API generating the OpenAPI 3.1
// document from the registered operations, the {success, message, data} envelope on every response,
// request ids, access logs, metrics, CORS, client IPs, lingering close and graceful shutdown.
package httpx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/cors"
	"github.com/valyala/fasthttp"
)

// BodyLimit is the largest request body accepted.
const BodyLimit = 1 << 20

// ServerOptions configures NewServer.
type ServerOptions struct {
	Title, Version string
	// PublicURL is the server address the OpenAPI document names (Server:PublicUrl).
	PublicURL      string
	Origins        []string
	TrustedProxies []string
	// IPv6LimitPrefix: an IPv6 client's per-IP limits count under its prefix of this many bits
	// (Server:Ipv6LimitPrefix; 0 is ratelimit.DefaultIPv6Prefix).
	IPv6LimitPrefix int
	// WriteTimeout bounds each write of an answer (each 64 KiB must be taken by the client within
	// it; a streamed answer is not cut while its client reads); 0 is none.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no next request; 0 is 60 s.
	IdleTimeout time.Duration
	// MaxConnsPerIP is the most connections open at once from one client address (an IPv6
	// client's prefix); 0 is none. TrustedProxies are exempt.
	MaxConnsPerIP int
	Logger        *slog.Logger
	Metrics       *Metrics
	Guard         Guard
	// Idempotency serves the operations registered as Idempotent.
	Idempotency Idempotency
	// Before runs on every request after the request context is set (e.g. the per-IP limit).
	Before []fiber.Handler
	// LimitHeaders are the response headers Before's rate limits send (ratelimit.DocHeaders):
	// Finish declares them on every response of every operation but the probes, which no limit
	// counts; required on the answers below 400, which always pass the limits, optional on the
	// errors, some of which are answered before any limit counted (see documentLimitHeaders).
	LimitHeaders map[string]*huma.Param
	// Tags describe the OpenAPI document's tags, by name (the platform's and every module's).
	Tags map[string]string
}

// Server owns the Fiber app and the huma API.
type Server struct {
	App *fiber.App
	API *API
	log *slog.Logger

	metrics *Metrics
	// limitHeaders: ServerOptions.LimitHeaders.
	limitHeaders map[string]*huma.Param
	// tags: ServerOptions.Tags.
	tags map[string]string
	// allowOrigin reports whether CORS grants an Origin (Frontend:Origins).
	allowOrigin func(string) bool
	once        sync.Once
	docOnce     sync.Once
	patterns    []routePattern
	addr        net.Addr
	ln          *serverListener
	linger      lingerBounds
	limits      connLimits
}

// Addr is the bound listener address once Listen returned.
func (s *Server) Addr() string {
	if s.addr == nil {
		return ""
	}
	return s.addr.String()
}

// NewServer builds the Fiber app with every platform middleware and the huma API on it.
func NewServer(o ServerOptions) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	trusted, err := ParseTrustedProxies(o.TrustedProxies)
	if err != nil {
		return nil, err
	}
	s := &Server{log: o.Logger, linger: defaultLinger, metrics: o.Metrics, limitHeaders: o.LimitHeaders, tags: o.Tags,
		limits: connLimits{perIP: o.MaxConnsPerIP, ipv6Prefix: o.IPv6LimitPrefix, exempt: trusted, writeTimeout: o.WriteTimeout}}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 60 * time.Second
	}
	app := fiber.New(fiber.Config{
		AppName:               o.Title,
		BodyLimit:             BodyLimit,
		DisableStartupMessage: true,
		ErrorHandler:          s.errorHandler,
		ReadBufferSize:        16 << 10,
		// Paths are case-sensitive (RFC 3986): /API/ENGINES is a 404, not /api/engines. A trailing
		// slash is ignored (StrictRouting off): /api/engines/ is /api/engines.
		CaseSensitive: true,
		// fasthttp would parse a multipart/form-data body while reading the request and answer a
		// bare 400 when it is not one; the API reads only JSON, so such a body reaches the route
		// and is a 415 like any other type.
		DisablePreParseMultipartForm: true,
		// A client must send its request within ReadTimeout (slow-request floods). The write
		// timeout is the listener's (connLimits): per 64 KiB written, not per answer, so streamed
		// AI answers are not cut.
		ReadTimeout: 30 * time.Second,
		IdleTimeout: o.IdleTimeout,
	})
	s.App = app
	// Fiber answers a method it does not know (PROPFIND, MKCOL, any token) itself, 400 text/plain
	// "Invalid http method", before any middleware: route those here instead.
	routed := app.Server().Handler
	app.Server().Handler = func(rc *fasthttp.RequestCtx) {
		if knownMethod(rc.Method()) {
			routed(rc)
			return
		}
		s.unknownMethod(rc)
	}
	app.Use(requestContext(trusted, o.IPv6LimitPrefix))
	app.Use(responseHeaders)
	app.Use(accessLog(o.Logger, o.Metrics, s.errorHandler))
	app.Use(recoverer(o.Logger))
	s.allowOrigin = originMatcher(o.Origins)
	app.Use(cors.New(cors.Config{
		AllowOriginsFunc: s.allowOrigin,
		AllowMethods:     "GET,POST,PUT,DELETE,OPTIONS",
		// Empty: a preflight from an allowed origin gets the headers it asks for. The OpenAI SDKs
		// send their own (x-stainless-os, x-stainless-retry-count, …), which a fixed list refused.
		AllowHeaders:     "",
		ExposeHeaders:    exposeHeaders,
		AllowCredentials: true,
		MaxAge:           600,
	}))
	// Before anything reads a body: a compressed one would be inflated without bound.
	app.Use(identityBodies)
	for _, h := range o.Before {
		app.Use(h)
	}
	s.API = newAPI(app, o.Title, o.Version, o.Guard, o.Idempotency)
	serveDocument(app, "/api/openapi", s.Document)
	if o.PublicURL != "" {
		s.API.OpenAPI().Servers = []*huma.Server{{URL: strings.TrimRight(o.PublicURL, "/"), Description: "This deployment"}}
	}
	return s, nil
}

// exposeHeaders are the response headers a page of an allowed origin may read.
const exposeHeaders = "X-Request-Id,X-RateLimit-Limit,X-RateLimit-Remaining,X-RateLimit-Reset," +
	"RateLimit,RateLimit-Policy,Retry-After," + ReplayedHeader

func originMatcher(origins []string) func(string) bool {
	set := map[string]bool{}
	for _, o := range origins {
		set[strings.TrimRight(o, "/")] = true
	}
	return func(origin string) bool { return set[origin] }
}

// unrouted is the answer to a request no route takes: on a routed path, OPTIONS (one that is not
// a CORS preflight, which the CORS middleware answered) is 204 with Allow, and any other method
// 405 with Allow; elsewhere 404. Allow names OPTIONS too, since it is answered.
func (s *Server) unrouted(c *fiber.Ctx) error {
	if allowed := s.allowedMethods(c.Path()); len(allowed) > 0 {
		allowed = append(allowed, fiber.MethodOptions)
		sort.Strings(allowed)
		c.Set(fiber.HeaderAllow, strings.Join(allowed, ", "))
		if c.Method() == fiber.MethodOptions {
			return c.SendStatus(http.StatusNoContent)
		}
		return NewError(http.StatusMethodNotAllowed, fmt.Sprintf("Method %s is not allowed on %s", c.Method(), c.Path()))
	}
	return NewError(http.StatusNotFound, "No route matches "+c.Method()+" "+c.Path())
}

// knownMethod reports whether Fiber routes method (fiber.DefaultMethods, its RequestMethods).
func knownMethod(method []byte) bool {
	for _, m := range fiber.DefaultMethods {
		if string(method) == m {
			return true
		}
	}
	return false
}

// unknownMethod answers a request whose method Fiber does not know as unrouted answers a known
// one no route takes (TRACE): 405 with Allow, or 404, in the envelope, with the request id and
// the headers every answer carries. No route or middleware runs: there is nothing to limit.
func (s *Server) unknownMethod(rc *fasthttp.RequestCtx) {
	c := s.App.AcquireCtx(rc)
	defer s.App.ReleaseCtx(c)
	setStaticHeaders(&c.Response().Header)
	id := requestID(c)
	c.Set(fiber.HeaderXRequestID, id)
	c.Locals(requestIDKey, id)
	if err := s.errorHandler(c, s.unrouted(c)); err != nil {
		c.Status(fiber.StatusInternalServerError)
	}
	if s.metrics != nil {
		s.metrics.requests.WithLabelValues("other", "unmatched", strconv.Itoa(c.Response().StatusCode())).Inc()
	}
}

// Finish adds the fallback handler (404 or 405 in the envelope) after every route is registered.
func (s *Server) Finish() { s.App.Use(s.unrouted) }

// Document is the OpenAPI document, completed (finishDocument) at its first use, which must come
// after Finish: the served document's first request, or a test. Until then the service does not
// hold what completing it adds (the rate-limit headers of every response).
func (s *Server) Document() *huma.OpenAPI {
	s.docOnce.Do(func() { finishDocument(s.API.OpenAPI(), s.limitHeaders, s.tags) })
	return s.API.OpenAPI()
}

type routePattern struct {
	re     *regexp.Regexp
	method string
}

func (s *Server) allowedMethods(path string) []string {
	s.once.Do(func() {
		for _, r := range s.App.GetRoutes(true) {
			if r.Method == "USE" || strings.Contains(r.Path, "*") {
				continue
			}
			var b strings.Builder
			b.WriteString("^")
			for _, seg := range strings.Split(strings.Trim(r.Path, "/"), "/") {
				b.WriteString("/")
				if strings.HasPrefix(seg, ":") {
					b.WriteString("[^/]+")
				} else {
					b.WriteString(regexp.QuoteMeta(seg))
				}
			}
			b.WriteString("/?$")
			s.patterns = append(s.patterns, routePattern{re: regexp.MustCompile(b.String()), method: r.Method})
		}
	})
	seen := map[string]bool{}
	for _, p := range s.patterns {
		if p.re.MatchString(path) {
			seen[p.method] = true
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// errorHandler writes every error Fiber sees (routing, body limit, middleware) as the envelope.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	var fe *fiber.Error
	var out *Error
	if errors.As(err, &fe) {
		switch fe.Code {
		case fiber.StatusRequestEntityTooLarge:
			out = NewError(fe.Code, "Request body is larger than 1 MiB")
		case fiber.StatusNotFound:
			out = NewError(fe.Code, "No route matches "+c.Method()+" "+c.Path())
		case fiber.StatusTooManyRequests, fiber.StatusServiceUnavailable:
			out = NewError(fe.Code, fe.Message)
		default:
			// Never echo fasthttp's parse errors: they quote the raw request, headers included
			// (an Authorization token among them).
			out = NewError(fe.Code, "Malformed request: "+http.StatusText(fe.Code))
		}
	} else {
		out = FromError(err)
		if out.Status >= 500 && !errors.As(err, new(*Error)) {
			s.log.Error("request failed", "requestId", c.Locals(requestIDKey), "error", err.Error())
		}
	}
	for k, v := range out.headers {
		c.Set(k, v)
	}
	if c.Locals(requestIDKey) == nil {
		// Refused by fasthttp before any middleware ran (a body announced over the limit, headers
		// too large, a malformed request): the headers every answer carries are still due.
		// An allowed origin is granted the answer as the CORS middleware grants every other one,
		// so a page that sent too large a body reads the 413 instead of a CORS failure.
		setStaticHeaders(&c.Response().Header)
		c.Set(fiber.HeaderXRequestID, newRequestID())
		c.Vary(fiber.HeaderOrigin)
		if origin := c.Get(fiber.HeaderOrigin); origin != "" && s.allowOrigin != nil && s.allowOrigin(origin) {
			c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
			c.Set(fiber.HeaderAccessControlAllowCredentials, "true")
			c.Set(fiber.HeaderAccessControlExposeHeaders, exposeHeaders)
		}
	}
	if w := s.API.errorWriterFor(c.Path()); w != nil {
		return w(c, out)
	}
	return c.Status(out.Status).JSON(out)
}

// Listen serves on addr until Shutdown; it returns once the listener is bound, so a port clash
// fails startup.
func (s *Server) Listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", addr, err)
	}
	s.addr = ln.Addr()
	s.ln = newServerListener(ln, s.linger)
	s.ln.limits = s.limits
	go func() {
		if err := s.App.Listener(s.ln); err != nil {
			s.log.Error("http server stopped", "error", err.Error())
		}
	}()
	return nil
}

// Shutdown stops accepting connections and waits for in-flight requests until ctx ends; then it
// closes whatever connections are left (idle keep-alives, connections that never sent a request).
// Connections still lingering after their last answer (see LingerTime) are closed when ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.App.ShutdownWithContext(ctx)
	if err != nil && s.ln != nil {
		s.ln.closeAll()
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = s.App.ShutdownWithContext(cctx)
		err = nil
	}
	if s.ln != nil {
		s.ln.stopLingering(ctx)
	}
	return err
}
