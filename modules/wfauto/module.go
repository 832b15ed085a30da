// Package wfauto is the workflow-automation module: one account per user, provisioned by an
// external cell through the platform's lifecycle, with the account's random key as
// Idempotency-Key; the finisher completes what a crash left Pending and deprovisions the
// accounts of deleted users.
package wfauto

import (
	"log/slog"
	"time"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/modules/wfauto/cell"
	"provisioner/modules/wfauto/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
)

// Module is the wfauto module: its configuration section (WfautoProvisioning:*), its OpenAPI tags
// and its wiring.
var Module = httpx.ResourceModule("wfauto", Settings, map[string]string{
	"Workflow automation":        "The signed-in user's workflow-automation account, provisioned by the external cell.",
	"Admin: workflow automation": "Every workflow-automation account (role Admin).",
}, migrations.FS, func(s *Service) *Handler { return &Handler{svc: s} },
	provision.Resource[*Provisioner](func(d *bun.DB, c *cell.Client, a *audit.Recorder, log *slog.Logger) *Provisioner {
		return &Provisioner{Spec: spec, db: d, cell: c, audit: a, log: log}
	}),
	provision.Summarised(func(s *Service) *provision.Summary[View] {
		return &provision.Summary[View]{Key: "wfautoAccounts", DB: s.db, Spec: spec, Model: (*Account)(nil), List: s.List}
	}),
	fx.Provide(func(w Config) *cell.Client {
		return cell.New(w.BaseUrl, w.ApiKey, time.Duration(w.TimeoutSeconds)*time.Second)
	},
		func(d *bun.DB, c *cell.Client, a *audit.Recorder, f *provision.Finisher) *Service {
			return &Service{db: d, cell: c, audit: a, finisher: f}
		}),
)
