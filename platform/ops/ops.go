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
}

// New builds Ops; redis may be nil.
func New(db *bun.DB, rc *redis.Client, reg *prometheus.Registry, server *httpx.Server) *Ops {
	return &Ops{db: db, redis: rc, reg: reg, server: server}
}

// Health is the data of /healthz and /readyz.
type Health struct {
	Status string            `json:"status" example:"ok"`
	Checks map[string]string `json:"checks,omitempty" doc:"Each dependency: ok, down or disabled."`
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
	o.server.App.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(o.reg, promhttp.HandlerOpts{})))
	docs.Register(o.server.App)
}

// Check pings every dependency.
func (o *Ops) Check(ctx context.Context) Health {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	h := Health{Status: "ok", Checks: map[string]string{"database": "ok", "redis": "ok"}}
	if err := o.db.PingContext(ctx); err != nil {
		h.Status, h.Checks["database"] = "unavailable", "down"
	}
	if o.redis == nil {
		h.Checks["redis"] = "disabled"
	} else if err := redisx.Ping(ctx, o.redis); err != nil {
		h.Status, h.Checks["redis"] = "unavailable", "down"
	}
	return h
}
