// Package admin is the administration module: users, the audit log, the per-user dashboard and
// the public platform metrics. Resource-specific admin routes live in their own modules; this one
// owns what spans them, assembled from what each module contributes through fx value groups.
package admin

import (
	"time"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/modules/admin/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/module"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
	"provisioner/platform/summary"
)

// Module is the admin module: its wiring, its audit namespaces and its OpenAPI tags.
var Module = module.Module{Name: "admin", Options: wiring, AuditNamespaces: []string{"user", "audit"},
	Tags: map[string]string{
		"Admin: users":        "User administration (role Admin).",
		"Admin: audit events": "The audit log (role Admin); every change to it is itself audited.",
	}}

// wiring is everything the admin module contributes to the fx graph.
var wiring = fx.Module("admin",
	fx.Provide(
		httpx.AsRoutes(NewHandler),
		db.AsMigrations(func() db.Migrations { return db.Migrations{Module: "admin", FS: migrations.FS} }),
	),
)

// Params are the module's dependencies, including every module's contributions.
type Params struct {
	fx.In
	Lifecycle    fx.Lifecycle
	DB           *bun.DB
	Hasher       *secrets.Hasher
	Audit        *audit.Recorder
	Releasers    []provision.UserReleaser       `group:"user_releasers"`
	Contributors []summary.DashboardContributor `group:"dashboard"`
	Counters     []summary.Counter              `group:"platform_counts"`
}

// MetricsTTL is how long the platform metrics are cached.
const MetricsTTL = 30 * time.Second

// NewHandler builds the module's services and handler.
func NewHandler(p Params) *Handler {
	overview := newOverview(p.DB, p.Contributors, p.Counters, MetricsTTL)
	p.Lifecycle.Append(fx.StopHook(overview.stop))
	return &Handler{
		users:    &Users{db: p.DB, hasher: p.Hasher, audit: p.Audit, releasers: p.Releasers},
		events:   &AuditEvents{db: p.DB, audit: p.Audit},
		overview: overview,
	}
}
