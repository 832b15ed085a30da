// Package wfauto is the workflow-automation module: one account per user, provisioned by an
// external cell. Local state first (Pending), then the cell with the account's random key as
// Idempotency-Key, then the outcome; the background finisher completes what a crash left Pending
// and deprovisions the accounts of deleted users.
package wfauto

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/modules/wfauto/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/module"
	"provisioner/platform/provision"
	"provisioner/platform/summary"
)

// Module is the wfauto module: its wiring, its configuration section (WfautoProvisioning:*), its
// audit namespace and its OpenAPI tags.
var Module = module.Module{Name: "wfauto", Options: wiring, Config: Settings, AuditNamespaces: []string{"wfauto"},
	Tags: map[string]string{
		"Workflow automation":        "The signed-in user's workflow-automation account, provisioned by the external cell.",
		"Admin: workflow automation": "Every workflow-automation account (role Admin).",
	}}

// wiring is everything the wfauto module contributes to the fx graph.
var wiring = fx.Module("wfauto",
	fx.Provide(
		func(w Config) *Cell {
			return NewCell(w.BaseUrl, w.ApiKey, time.Duration(w.TimeoutSeconds)*time.Second)
		},
		func(d *bun.DB, c *Cell, a *audit.Recorder, log *slog.Logger) *Provisioner {
			return &Provisioner{Spec: spec, db: d, cell: c, audit: a, log: log}
		},
		provision.AsProvisioner(func(p *Provisioner) *Provisioner { return p }),
		provision.AsUserReleaser(func(p *Provisioner) *Provisioner { return p }),
		func(d *bun.DB, c *Cell, a *audit.Recorder, f *provision.Finisher) *Service {
			return &Service{db: d, cell: c, audit: a, finisher: f}
		},
		httpx.AsRoutes(func(s *Service) *Handler { return &Handler{svc: s} }),
		summary.AsDashboardContributor(func(s *Service) *Summary { return &Summary{svc: s} }),
		summary.AsCounter(func(s *Service) *Summary { return &Summary{svc: s} }),
		db.AsMigrations(func() db.Migrations { return db.Migrations{Module: "wfauto", FS: migrations.FS} }),
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
	return summary.Section{Key: "wfautoAccounts", Items: list, Total: len(list)}, nil
}

// PlatformCounts implements summary.Counter: live (Pending or Active) accounts, one query.
func (s *Summary) PlatformCounts(ctx context.Context) (map[string]int64, error) {
	n, err := s.svc.db.NewSelect().Model((*Account)(nil)).Where("status IN ('Pending', 'Active')").Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("count wfauto accounts: %w", err)
	}
	return map[string]int64{"wfautoAccounts": int64(n)}, nil
}
