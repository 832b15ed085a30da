// Package dns is the DNS cell: A records in a Cloudflare zone, with our own trace of every state.
// The platform's lifecycle stores the intent, calls the provider and records the outcome; the
// finisher completes what a crash left in flight (looking the name up first, so nothing is made
// twice) and sweeps the records of rows that ended while their create may have reached it.
package dns

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/modules/dns/cloudflare"
	"provisioner/modules/dns/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/config"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
)

// Module is the dns module: its configuration section (Dns:*), its OpenAPI tags and its wiring.
var Module = httpx.ResourceModule("dns", Settings, map[string]string{
	"DNS":                "The signed-in user's A records in the DNS cell.",
	"Admin: DNS records": "Every DNS record (role Admin).",
}, migrations.FS, func(s *Service) *Handler { return &Handler{svc: s} },
	provision.Resource[*Provisioner](func(c *cloudflare.Client, a *audit.Recorder, log *slog.Logger) *Provisioner {
		return &Provisioner{Spec: spec, provider: c, audit: a, log: log}
	}),
	provision.Summarised(func(s *Service) *provision.Summary[View] {
		return &provision.Summary[View]{Key: "dnsRecords", DB: s.db, Spec: spec, Model: (*Record)(nil), List: s.List}
	}),
	fx.Provide(newClient,
		provision.AsProvisioner(func(c *cloudflare.Client, a *audit.Recorder, log *slog.Logger) *provision.Sweeper {
			return newSweeper(c, a, log)
		}),
		func(d *bun.DB, cfg Config, a *audit.Recorder, f *provision.Finisher) *Service {
			return &Service{db: d, cfg: cfg, audit: a, finisher: f}
		}),
)

// newClient builds the provider client with our own outbound budget (Dns:OutboundRate, below the
// provider's 1,200 calls per 5 minutes; provision.Budget): a call waits for it up to BudgetWait,
// past that the record stays Pending and the finisher tries again when the budget resets.
func newClient(platform *config.Config, cfg Config, rc *redis.Client, log *slog.Logger) (*cloudflare.Client, error) {
	budget, err := provision.Budget{Name: "DnsOutbound", Prefix: "dns", Setting: "Dns:OutboundRate", Rate: cfg.OutboundRate,
		Scope: cfg.ZoneId, What: "DNS outbound budget", MaxWait: BudgetWait}.Take(platform, rc, log)
	if err != nil {
		return nil, err
	}
	return cloudflare.New(cloudflare.Options{BaseURL: cfg.BaseUrl, ZoneID: cfg.ZoneId, Token: cfg.ApiToken,
		Timeout: time.Duration(cfg.TimeoutSeconds) * time.Second, Logger: log, Budget: budget}), nil
}

// BudgetWait is the longest a provider call waits for the outbound budget.
const BudgetWait = 3 * time.Second
