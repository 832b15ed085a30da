// Package dns is the DNS cell: A records in a Cloudflare zone, with our own trace of every state.
// The intent is stored (Pending), the provider is called, the outcome is recorded; the background
// finisher completes whatever a crash or a timeout left Pending or Revoking, looking the name up
// first so nothing is created twice, and deletes the records at the provider of rows that ended
// Failed (or Revoked at once) while their create may have reached it (newSweeper).
package dns

import (
	"context"
	"errors"
	"fmt"
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
	"provisioner/platform/ratelimit"
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
// provider's 1,200 calls per 5 minutes), shared across replicas through Redis. When the budget is
// spent, a call waits for the next window (up to BudgetWait); past that the call is put off
// (provision.Deferred, not a failed attempt) and the record stays Pending: the finisher tries it
// again when the budget resets, nothing bursts into the provider's 5-minute block. Calls waiting
// for the budget are served a user at a time in turn (ratelimit.Outbound), so one user's queued work does
// not hold up another user's calls.
func newClient(platform *config.Config, cfg Config, rc *redis.Client, log *slog.Logger) (*cloudflare.Client, error) {
	opts := ratelimit.Options{Prefix: platform.Redis.KeyPrefix + ":dns", Rates: map[string]string{"DnsOutbound": cfg.OutboundRate}, Logger: log}
	if rc != nil {
		opts.Redis = rc
	}
	budget, err := ratelimit.New(opts)
	var re *ratelimit.RateError
	if errors.As(err, &re) {
		return nil, &config.ValidationError{Key: "Dns:OutboundRate", Reason: re.Reason()}
	}
	if err != nil {
		return nil, &config.ValidationError{Key: "Dns:OutboundRate", Reason: err.Error()}
	}
	out := ratelimit.NewOutbound(ratelimit.Outbound{Limiter: budget, Name: "DnsOutbound", Key: cfg.ZoneId,
		What: "the DNS outbound budget", MaxWait: BudgetWait})
	return cloudflare.New(cloudflare.Options{
		BaseURL: cfg.BaseUrl, ZoneID: cfg.ZoneId, Token: cfg.ApiToken,
		Timeout: time.Duration(cfg.TimeoutSeconds) * time.Second, Logger: log,
		Budget: func(ctx context.Context) error {
			var spent *ratelimit.SpentError
			err := out.Take(ctx)
			if errors.As(err, &spent) { // not sent: not a failed attempt; the finisher tries again when the budget resets
				return &provision.Deferred{At: spent.Until, Err: fmt.Errorf("DNS outbound budget spent until %s: queued for the background finisher",
					spent.Until.UTC().Format(time.RFC3339))}
			}
			return err
		},
	}), nil
}

// BudgetWait is the longest a provider call waits for the outbound budget.
const BudgetWait = 3 * time.Second
