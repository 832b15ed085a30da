// Package ops serves the operational endpoints: /healthz (process up), /readyz (control database
// and Redis reachable, else 503) and /metrics (Prometheus exposition).
package ops

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"golang.org/x/sync/singleflight"

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
}

// New builds Ops; redis may be nil.
func New(db *bun.DB, rc *redis.Client, reg *prometheus.Registry, server *httpx.Server) *Ops {
	return &Ops{db: db, redis: rc, reg: reg, server: server}
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
	o.server.App.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{})))
	api.OpenAPI().AddOperation(&huma.Operation{
		OperationID: "metrics", Method: http.MethodGet, Path: "/metrics", Tags: []string{"Operations"},
		Summary: "Prometheus metrics",
		Description: "The service's metrics in the Prometheus text exposition format (not the envelope), for a scraper: " +
			"`http_requests_total` and `http_request_duration_seconds` by method, route and status, and the Go runtime and process " +
			"collectors. Public, like /healthz and /readyz: keep it off the public network (a reverse proxy) if its figures should stay private.",
		Responses: map[string]*huma.Response{
			"200": {Description: "The metrics, Prometheus text format (version 0.0.4).",
				Content: map[string]*huma.MediaType{"text/plain": {Schema: &huma.Schema{Type: "string"}}}},
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
