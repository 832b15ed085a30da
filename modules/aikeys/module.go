// Package aikeys is the AI keys module: hashed keys with instant rotation and revocation, and the
// generation gateway (a simple generate route and an OpenAI-compatible streaming pass-through),
// with per-key limits and batched usage metering.
package aikeys

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/modules/aikeys/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/coherent"
	"provisioner/platform/config"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/module"
	"provisioner/platform/provision"
	"provisioner/platform/ratelimit"
	"provisioner/platform/summary"
)

// CacheTTL bounds how long a key check is cached in-process (dropped at once on a change).
const CacheTTL = 30 * time.Second

// Module is the aikeys module: its wiring, its configuration section (Ai:*, AiKeys:*), its audit
// namespace and its OpenAPI tags.
var Module = module.Module{Name: "aikeys", Options: wiring, Config: Settings, AuditNamespaces: []string{"aikey"},
	Tags: map[string]string{
		"AI keys":       "The signed-in user's AI API keys (managed with a JWT).",
		"AI generation": "Generation with an AI key (X-API-Key, or a Bearer token on the OpenAI-compatible route); see modules/aikeys/README.md.",
	}}

// wiring is everything the aikeys module contributes to the fx graph.
var wiring = fx.Module("aikeys",
	fx.Provide(
		func(d *bun.DB, cfg Config, a *audit.Recorder, bus *coherent.Bus) *Keys {
			k := NewKeys(d, a, bus, cfg.AiKeys.MaxPerUser)
			k.defaultBudget = cfg.AiKeys.DefaultMonthlyTokenBudget
			return k
		},
		func(cfg Config) *Upstream {
			return NewUpstream(cfg.Ai.BaseUrl, cfg.Ai.ApiKey, cfg.Ai.DefaultModel, time.Duration(cfg.Ai.TimeoutSeconds)*time.Second)
		},
		func(cfg Config) *Caps { return NewCaps(cfg.Ai) },
		newMeter,
		newBudgets,
		func(k *Keys, c *Caps, b *Budgets, u *Upstream, m *Meter, l *ratelimit.Limiter, log *slog.Logger) *Passthrough {
			return &Passthrough{keys: k, caps: c, budgets: b, upstream: u, meter: m, limiter: l, log: log}
		},
		httpx.AsRoutes(func(k *Keys, c *Caps, b *Budgets, u *Upstream, m *Meter, l *ratelimit.Limiter, p *Passthrough) *Handler {
			return &Handler{keys: k, caps: c, budgets: b, upstream: u, meter: m, limiter: l, pass: p}
		}),
		provision.AsUserReleaser(func(k *Keys) *Keys { return k }),
		provision.AsTakeoverRevoker(func(k *Keys) *Keys { return k }),
		summary.AsDashboardContributor(func(k *Keys) *Summary { return &Summary{keys: k} }),
		summary.AsCounter(func(k *Keys) *Summary { return &Summary{keys: k} }),
		db.AsMigrations(func() db.Migrations { return db.Migrations{Module: "aikeys", FS: migrations.FS} }),
	),
)

// newMeter builds the meter and appends its start and stop to the lifecycle then, as it is built:
// the HTTP server's routes need it, so this comes before the server's own hook, and fx stops in
// the reverse order. The meter's last flush thus comes after the server has answered the
// generations in flight at shutdown (a hook appended by an fx.Invoke of this module came after
// the server's and ran before it: what those generations added was lost).
func newMeter(lc fx.Lifecycle, d *bun.DB, log *slog.Logger, _ *db.Migrated) *Meter {
	m := NewMeter(d, log, time.Second)
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { m.Start(); return nil },
		OnStop:  m.Stop,
	})
	return m
}

// newBudgets builds the budgets; at shutdown (after the HTTP server: see newMeter) it waits for
// the settlements in flight.
func newBudgets(lc fx.Lifecycle, rc *redis.Client, platform *config.Config, log *slog.Logger) *Budgets {
	b := NewBudgets(rc, platform.Redis.KeyPrefix, log)
	lc.Append(fx.StopHook(b.Wait))
	return b
}

// Summary contributes the dashboard section and the platform counts.
type Summary struct{ keys *Keys }

// DashboardSection implements summary.DashboardContributor.
func (s *Summary) DashboardSection(ctx context.Context, userID int64) (summary.Section, error) {
	list, err := s.keys.List(ctx, userID)
	if err != nil {
		return summary.Section{}, err
	}
	return summary.Section{Key: "aiKeys", Items: list, Total: len(list)}, nil
}

// PlatformCounts implements summary.Counter: usable keys (Active, not expired), one query.
func (s *Summary) PlatformCounts(ctx context.Context) (map[string]int64, error) {
	n, err := usable(s.keys.db.NewSelect().Model((*Key)(nil))).Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("count ai keys: %w", err)
	}
	return map[string]int64{"aiKeys": int64(n)}, nil
}
