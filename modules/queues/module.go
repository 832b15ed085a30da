// Package queues is the message-queue module: a user's queue space is a RabbitMQ virtual host and
// a user with every permission on that virtual host only, made through the broker's management
// HTTP API. The intent is stored (Provisioning), the broker is called, the outcome is recorded;
// the background finisher completes what a crash or a failure left Provisioning or Deleting,
// looking every name up first so nothing is made twice, and sweeps from the broker what a Failed
// space's attempts may have left.
package queues

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/modules/queues/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/module"
	"provisioner/platform/provision"
	"provisioner/platform/ratelimit"
	"provisioner/platform/secrets"
	"provisioner/platform/summary"
)

// Module is the queues module: its wiring, its configuration section (Queues:*), its audit
// namespace and its OpenAPI tags.
var Module = module.Module{Name: "queues", Options: wiring, Config: Settings, AuditNamespaces: []string{"queues"},
	Tags: map[string]string{
		"Queues":        "The user's RabbitMQ queue spaces.",
		"Admin: queues": "Every queue space (Admin).",
	}}

var wiring = fx.Module("queues",
	fx.Provide(
		NewBroker,
		func(b *Broker, s *secrets.Sealer, a *audit.Recorder, log *slog.Logger) *Provisioner {
			return &Provisioner{Spec: spec, broker: b, sealer: s, audit: a, log: log}
		},
		provision.AsProvisioner(func(p *Provisioner) *Provisioner { return p }),
		provision.AsProvisioner(func(p *Provisioner) *Sweeper { return &Sweeper{p: p} }),
		provision.AsUserReleaser(func(p *Provisioner) *Provisioner { return p }),
		func(d *bun.DB, cfg Config, s *secrets.Sealer, a *audit.Recorder, f *provision.Finisher) *Service {
			return &Service{db: d, cfg: cfg, sealer: s, audit: a, finisher: f}
		},
		provision.AsTakeoverRevoker(func(s *Service, log *slog.Logger) *Takeover { return &Takeover{svc: s, log: log} }),
		httpx.AsRoutes(func(s *Service, l *ratelimit.Limiter) *Handler { return &Handler{svc: s, limiter: l} }),
		summary.AsDashboardContributor(func(s *Service) *Summary { return &Summary{svc: s} }),
		summary.AsCounter(func(s *Service) *Summary { return &Summary{svc: s} }),
		db.AsMigrations(func() db.Migrations { return db.Migrations{Module: "queues", FS: migrations.FS} }),
	),
)

// Summary contributes the dashboard section and the platform counts.
type Summary struct{ svc *Service }

// DashboardSection implements summary.DashboardContributor.
func (s *Summary) DashboardSection(ctx context.Context, userID int64) (summary.Section, error) {
	list, err := s.svc.List(ctx, userID)
	if err != nil {
		return summary.Section{}, err
	}
	return summary.Section{Key: "queueSpaces", Items: list, Total: len(list)}, nil
}

// PlatformCounts implements summary.Counter: live (Provisioning or Active) spaces, one query.
func (s *Summary) PlatformCounts(ctx context.Context) (map[string]int64, error) {
	n, err := s.svc.db.NewSelect().Model((*Space)(nil)).Where("status IN (?, ?)", StatusProvisioning, StatusActive).Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("count queue spaces: %w", err)
	}
	return map[string]int64{"queueSpaces": int64(n)}, nil
}
