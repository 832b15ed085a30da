// Package ops serves the operational endpoints: /healthz (process up), /readyz (control database
// and Redis reachable, else 503) and /metrics (Prometheus exposition; only to loopback, to
// Ops:MetricsAllowedCidrs or with the bearer Ops:MetricsToken, a 404 to anyone else).
package ops

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"golang.org/x/sync/singleflight"

	"provisioner/platform/config"
	"provisioner/platform/docs"
	"provisioner/platform/httpx"
	"provisioner/platform/redisx"
)

// Ops registers the operational endpoints.
type Ops struct {
	db     *bun.DB
	redis  *redis.Client
	reg    *prometheus.Registry
	server *httpx.Server
	checks singleflight.Group

	// metricsCidrs: Ops:MetricsAllowedCidrs; metricsToken: the SHA-256 of Ops:MetricsToken, nil
	// when none is set.
	metricsCidrs []netip.Prefix
	metricsToken []byte
}

// New builds Ops; redis and cfg may be nil (no /metrics readers but loopback).
func New(db *bun.DB, rc *redis.Client, reg *prometheus.Registry, server *httpx.Server, cfg *config.Config) *Ops {
	o := &Ops{db: db, redis: rc, reg: reg, server: server}
	if cfg != nil {
		for _, s := range cfg.Ops.MetricsAllowedCidrs {
			if p, ok := config.TrustedProxy(s); ok && p.IsValid() {
				o.metricsCidrs = append(o.metricsCidrs, p)
			}
		}
		if cfg.Ops.MetricsToken != "" {
			h := sha256.Sum256([]byte(cfg.Ops.MetricsToken))
			o.metricsToken = h[:]
		}
	}
	return o
}

// mayReadMetrics reports whether the request may read /metrics: it carries the bearer token, or
// its client address is in Ops:MetricsAllowedCidrs, or is loopback and the request was not relayed
// by a proxy (a proxy on this machine makes every client look local).
func (o *Ops) mayReadMetrics(c *fiber.Ctx) bool {
	if o.metricsToken != nil {
		if a := c.Get(fiber.HeaderAuthorization); len(a) > 7 && strings.EqualFold(a[:7], "Bearer ") {
			h := sha256.Sum256([]byte(strings.TrimSpace(a[7:]))) // equal lengths: the compare takes constant time
			if subtle.ConstantTimeCompare(h[:], o.metricsToken) == 1 {
				return true
			}
		}
	}
	ip, err := netip.ParseAddr(httpx.FiberClientIP(c))
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range o.metricsCidrs {
		if p.Contains(ip) {
			return true
		}
	}
	relayed := c.Get(fiber.HeaderXForwardedFor) != "" || c.Get("Forwarded") != "" || c.Get("X-Real-Ip") != ""
	return ip.IsLoopback() && !relayed
}

// metricsGate answers anyone mayReadMetrics refuses as a path no route takes is answered.
func (o *Ops) metricsGate(c *fiber.Ctx) error {
	if !o.mayReadMetrics(c) {
		return httpx.NewError(http.StatusNotFound, "No route matches "+c.Method()+" "+c.Path())
	}
	return c.Next()
}

// Health is the data of /healthz and /readyz.
type Health struct {
	Status string  `json:"status" enum:"ok,unavailable" example:"ok" doc:"ok, or unavailable when a dependency is down (/readyz, with 503)."`
	Checks *Checks `json:"checks,omitempty" doc:"Each dependency /readyz checks; absent from /healthz, which checks none."`
}

// Checks is what /readyz found of each dependency.
type Checks struct {
	Database string `json:"database" enum:"ok,down" doc:"The control database: ok when it answered a ping within 2 s, else down."`
	Redis    string `json:"redis" enum:"ok,down,disabled" doc:"Redis: ok when it answered a ping within 2 s, down when not, disabled when no Redis is configured."`
}

// Register implements httpx.Routes.
func (o *Ops) Register(api *httpx.API) {
	httpx.Register(api, httpx.Public, huma.Operation{
		OperationID: "healthz", Method: http.MethodGet, Path: "/healthz", Tags: []string{"Operations"},
		Summary: "Liveness: the process is up",
	}, func(context.Context, *struct{}) (*httpx.Response[Health], error) {
		return httpx.OK("OK", Health{Status: "ok"}), nil
	})
	httpx.Register(api, httpx.Public, huma.Operation{
		OperationID: "readyz", Method: http.MethodGet, Path: "/readyz", Tags: []string{"Operations"},
		Summary: "Readiness: the control database and Redis answer", Errors: []int{http.StatusServiceUnavailable},
	}, func(ctx context.Context, _ *struct{}) (*httpx.Response[Health], error) {
		h := o.Check(ctx)
		if h.Status != "ok" {
			return nil, httpx.Unavailable("Not ready").WithData(h)
		}
		return httpx.OK("Ready", h), nil
	})
	// /metrics is promhttp's own handler (Prometheus text format, not JSON): a Fiber route,
	// documented here by hand.
	o.server.App.Get("/metrics", o.metricsGate, adaptor.HTTPHandler(promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{})))
	api.OpenAPI().AddOperation(&huma.Operation{
		OperationID: "metrics", Method: http.MethodGet, Path: "/metrics", Tags: []string{"Operations"},
		Summary: "Prometheus metrics",
		Description: "The service's metrics in the Prometheus text exposition format (not the envelope), for a scraper: " +
			"`http_requests_total` and `http_request_duration_seconds` by method, route and status, and the Go runtime and process " +
			"collectors. Served to loopback (not relayed by a proxy), to `Ops:MetricsAllowedCidrs`, or with " +
			"`Authorization: Bearer` and `Ops:MetricsToken`.",
		Responses: map[string]*huma.Response{
			"200": {Description: "The metrics, Prometheus text format (version 0.0.4).",
				Content: map[string]*huma.MediaType{"text/plain": {Schema: &huma.Schema{Type: "string"}}}},
			"404": {Description: "Any other client: answered as a path no route takes.",
				Content: map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{Ref: "#/components/schemas/Error"}}}},
		},
	})
	docs.Register(o.server.App)
}

// Check pings every dependency. Calls at the same time share one round of pings (the first
// caller's, which no caller's cancellation cuts short): /readyz is public and not rate limited, so
// a flood of it must not take a control database connection per call from the API's pool.
func (o *Ops) Check(ctx context.Context) Health {
	v, _, _ := o.checks.Do("check", func() (any, error) {
		return o.check(context.WithoutCancel(ctx)), nil
	})
	return v.(Health)
}

func (o *Ops) check(ctx context.Context) Health {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	h := Health{Status: "ok", Checks: &Checks{Database: "ok", Redis: "ok"}}
	if err := o.db.PingContext(ctx); err != nil {
		h.Status, h.Checks.Database = "unavailable", "down"
	}
	if o.redis == nil {
		h.Checks.Redis = "disabled"
	} else if err := redisx.Ping(ctx, o.redis); err != nil {
		h.Status, h.Checks.Redis = "unavailable", "down"
	}
	return h
}
