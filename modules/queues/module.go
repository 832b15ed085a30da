// Package queues is the message-queue module: a user's queue space is a RabbitMQ virtual host and
// a user with every permission on that virtual host only, made through the broker's management
// HTTP API. The intent is stored (Provisioning), the broker is called, the outcome is recorded;
// the background finisher completes what a crash or a failure left Provisioning or Deleting,
// looking every name up first so nothing is made twice, and sweeps from the broker what a Failed
// space's attempts may have left.
package queues

import (
	"log/slog"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/modules/queues/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
	"provisioner/platform/ratelimit"
	"provisioner/platform/secrets"
)

// Module is the queues module: its configuration section (Queues:*), its OpenAPI tags and its
// wiring.
var Module = httpx.ResourceModule("queues", Settings, map[string]string{
	"Queues":        "The user's RabbitMQ queue spaces.",
	"Admin: queues": "Every queue space (Admin).",
}, migrations.FS, func(s *Service, l *ratelimit.Limiter) *Handler { return &Handler{svc: s, limiter: l} },
	provision.Resource[*Provisioner](func(b *Broker, s *secrets.Sealer, a *audit.Recorder, log *slog.Logger) *Provisioner {
		return &Provisioner{Spec: spec, broker: b, sealer: s, audit: a, log: log}
	}),
	provision.Summarised(func(s *Service) *provision.Summary[View] {
		return &provision.Summary[View]{Key: "queueSpaces", DB: s.db, Spec: spec, Model: (*Space)(nil), List: s.List}
	}),
	fx.Provide(NewBroker,
		provision.AsProvisioner(func(p *Provisioner) *Sweeper { return &Sweeper{p: p} }),
		func(d *bun.DB, cfg Config, s *secrets.Sealer, a *audit.Recorder, f *provision.Finisher) *Service {
			return &Service{db: d, cfg: cfg, sealer: s, audit: a, finisher: f}
		},
		provision.AsTakeoverRevoker(func(s *Service, log *slog.Logger) *Takeover { return &Takeover{svc: s, log: log} })),
)
