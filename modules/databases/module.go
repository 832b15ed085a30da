// Package databases is the databases module: real tenant databases on PostgreSQL and
// MySQL/MariaDB, each with a login role of its own, paused, resumed and deleted on the engine,
// with usage read from the engines and an audited password reveal.
package databases

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/modules/databases/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/coherent"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/module"
	"provisioner/platform/provision"
	"provisioner/platform/ratelimit"
	"provisioner/platform/secrets"
)

// Module is the databases module: its wiring, its configuration section (ConnectionStrings:Tenant*,
// Engines:*, Databases:*), its audit namespaces and its OpenAPI tags.
var Module = module.Module{Name: "databases", Options: wiring, Config: Settings,
	AuditNamespaces: []string{"database", "access_credential"},
	Tags: map[string]string{
		"Databases": "The signed-in user's databases. A change that would wait for the engines answers 503 with Retry-After, " +
			"having changed nothing, while `Databases:MaxEngineWaits` requests already wait.",
		"Admin: database instances": "Every tenant database (role Admin); the engine waits of Databases apply.",
		"Admin: access credentials": "Extra login roles on tenant databases (role Admin); the engine waits of Databases apply.",
	}}

// wiring is everything the databases module contributes to the fx graph.
var wiring = fx.Module("databases",
	provision.Resource[*Provisioner](func(cfg Config, e *Engines, s *secrets.Sealer, a *audit.Recorder, log *slog.Logger) *Provisioner {
		return &Provisioner{Spec: spec, recovery: recoveryWindow(cfg), engines: e, sealer: s, audit: a, log: log}
	}),
	fx.Provide(
		newEngines,
		func(e *Engines) *CredentialProvisioner {
			return &CredentialProvisioner{Spec: credentialSpec, engines: e}
		},
		provision.AsProvisioner(func(p *CredentialProvisioner) *CredentialProvisioner { return p }),
		func(e *Engines, s *secrets.Sealer, a *audit.Recorder, cfg Config, log *slog.Logger) *RotationProvisioner {
			return &RotationProvisioner{Spec: rotationSpec, engines: e, sealer: s, audit: a, log: log, grace: cfg.Databases.RotationGraceSeconds}
		},
		provision.AsProvisioner(func(p *RotationProvisioner) *RotationProvisioner { return p }),
		func(d *bun.DB, s *secrets.Sealer, a *audit.Recorder, f *provision.Finisher, log *slog.Logger) *Takeover {
			return &Takeover{db: d, sealer: s, audit: a, finisher: f, log: log}
		},
		provision.AsTakeoverRevoker(func(t *Takeover) *Takeover { return t }),
		newService,
		provision.AsNewUserHook(func(s *Service) *NewUserHook { return &NewUserHook{svc: s} }),
		newUsageRefresher,
		httpx.AsRoutes(newHandler),
		db.AsMigrations(func() db.Migrations { return db.Migrations{Module: "databases", FS: migrations.FS} }),
	),
	provision.Summarised(func(s *Service) *Summary {
		return &Summary{Summary: provision.Summary[Item]{Key: "databases", List: s.List}, svc: s}
	}),
	fx.Invoke(startUsage),
)

func newEngines(lc fx.Lifecycle, cfg Config) (*Engines, error) {
	e, err := NewEngines(cfg)
	if err != nil {
		return nil, err
	}
	lc.Append(fx.StopHook(e.Close))
	return e, nil
}

func newService(d *bun.DB, cfg Config, e *Engines, s *secrets.Sealer, a *audit.Recorder,
	f *provision.Finisher, log *slog.Logger, bus *coherent.Bus) *Service {
	return &Service{db: d, cfg: cfg, engines: e, sealer: s, audit: a, finisher: f, log: log,
		waits: newEngineWaits(cfg.Databases.MaxEngineWaits),
		mine: coherent.NewCache(bus, coherent.CacheOptions[int64, string]{
			Table: "database_instances", Tag: coherent.IDTag[string], Key: coherent.IDKey,
		})}
}

func newUsageRefresher(d *bun.DB, cfg Config, e *Engines, a *audit.Recorder, log *slog.Logger) *UsageRefresher {
	every := time.Duration(cfg.Databases.UsageRefreshSeconds) * time.Second
	if every <= 0 {
		every = 30 * time.Second
	}
	return &UsageRefresher{db: d, engines: e, audit: a, log: log, interval: every}
}

func startUsage(lc fx.Lifecycle, u *UsageRefresher, _ *db.Migrated) {
	lc.Append(fx.Hook{OnStart: func(context.Context) error { u.Start(); return nil }, OnStop: u.Stop})
}

func newHandler(s *Service, d *bun.DB, e *Engines, sealer *secrets.Sealer, a *audit.Recorder, l *ratelimit.Limiter,
	f *provision.Finisher) *Handler {
	return &Handler{svc: s, engines: e, limiter: l,
		creds: &Credentials{db: d, svc: s, engines: e, sealer: sealer, audit: a, finisher: f}}
}

// RegistrationTimeout bounds how long registration waits for the first database.
const RegistrationTimeout = 5 * time.Second

// NewUserHook gives every new account its first database. Registration never fails because of
// the engine: a slow or down engine leaves the database Provisioning for the finisher.
type NewUserHook struct{ svc *Service }

// OnUserCreated implements provision.NewUserHook.
func (h *NewUserHook) OnUserCreated(ctx context.Context, u provision.NewUser) (any, error) {
	if h.svc.engines.Default() == "" {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, RegistrationTimeout)
	defer cancel()
	inst, o, err := h.svc.Create(cctx, CreateInput{UserID: u.UserID, Name: "default", SkipQuota: true, Background: true})
	if inst == nil {
		return nil, err
	}
	if inst.Status == StatusProvisioning && cctx.Err() != nil {
		// The attempt was cut short: it is rolled back and due again for the finisher.
		fresh, gerr := h.svc.get(context.WithoutCancel(ctx), inst.ID, 0)
		if gerr == nil {
			inst = fresh
		}
	}
	return h.svc.item(inst), o.Err
}

// Summary contributes the dashboard section (provision.Summary) and the platform counts.
type Summary struct {
	provision.Summary[Item]
	svc *Service
}

// PlatformCounts implements summary.Counter with one query.
func (s *Summary) PlatformCounts(ctx context.Context) (map[string]int64, error) {
	var c struct {
		All    int64 `bun:"total"`
		Active int64 `bun:"active"`
	}
	err := s.svc.db.NewSelect().Table("database_instances").
		ColumnExpr("count(*) FILTER (WHERE status <> 'Deleted') AS total").
		ColumnExpr("count(*) FILTER (WHERE status = 'Active') AS active").Scan(ctx, &c)
	if err != nil {
		return nil, fmt.Errorf("count databases: %w", err)
	}
	return map[string]int64{"databases": c.All, "activeDatabases": c.Active, "engines": int64(len(s.svc.engines.All()))}, nil
}
