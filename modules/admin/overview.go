package admin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/uptrace/bun"
	"golang.org/x/sync/errgroup"

	"provisioner/platform/summary"
)

// Dashboard is one user's resources across every module.
type Dashboard struct {
	User           User           `json:"user"`
	Databases      any            `json:"databases" doc:"The user's databases (items of the databases module)."`
	DnsRecords     any            `json:"dnsRecords" doc:"The user's DNS records."`
	WfautoAccounts any            `json:"wfautoAccounts" doc:"The user's workflow-automation accounts."`
	AiKeys         any            `json:"aiKeys" doc:"The user's AI keys (never the key text)."`
	Sections       map[string]any `json:"sections,omitempty" doc:"Sections of modules added after these four, by key."`
	Totals         map[string]int `json:"totals" doc:"Number of items per section."`
}

// Overview assembles the per-user dashboard and the platform metrics from what each module
// contributes; a new module appears here without this module changing.
type Overview struct {
	db           *bun.DB
	contributors []summary.DashboardContributor
	counters     []summary.Counter
	engines      int

	mu         sync.Mutex
	cached     PlatformMetrics
	cachedAt   time.Time
	refreshing bool
	ttl        time.Duration

	// life is cancelled when the app stops (stop); background is the running recount, if any.
	life       context.Context
	cancel     context.CancelFunc
	background sync.WaitGroup
}

func newOverview(db *bun.DB, contributors []summary.DashboardContributor, counters []summary.Counter, ttl time.Duration) *Overview {
	life, cancel := context.WithCancel(context.Background())
	return &Overview{db: db, contributors: contributors, counters: counters, ttl: ttl, life: life, cancel: cancel}
}

// stop cancels a running background recount and waits for it to end; none starts after it.
func (o *Overview) stop() {
	o.mu.Lock()
	o.cancel()
	o.mu.Unlock()
	o.background.Wait()
}

// DashboardFor assembles userID's dashboard, the modules' sections fetched concurrently.
func (o *Overview) DashboardFor(ctx context.Context, u User) (*Dashboard, error) {
	sections := make([]summary.Section, len(o.contributors))
	g, gctx := errgroup.WithContext(ctx)
	for i, c := range o.contributors {
		g.Go(func() error {
			s, err := c.DashboardSection(gctx, u.ID)
			if err != nil {
				return fmt.Errorf("dashboard section: %w", err)
			}
			sections[i] = s
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	d := &Dashboard{User: u, Databases: []any{}, DnsRecords: []any{}, WfautoAccounts: []any{}, AiKeys: []any{},
		Totals: map[string]int{"databases": 0, "dnsRecords": 0, "wfautoAccounts": 0, "aiKeys": 0}}
	for _, s := range sections {
		d.Totals[s.Key] = s.Total
		switch s.Key {
		case "databases":
			d.Databases = s.Items
		case "dnsRecords":
			d.DnsRecords = s.Items
		case "wfautoAccounts":
			d.WfautoAccounts = s.Items
		case "aiKeys":
			d.AiKeys = s.Items
		default:
			if d.Sections == nil {
				d.Sections = map[string]any{}
			}
			d.Sections[s.Key] = s.Items
		}
	}
	return d, nil
}

// PlatformMetrics are the public landing-page counts.
type PlatformMetrics struct {
	Users           int64            `json:"users" example:"120"`
	Databases       int64            `json:"databases" example:"150"`
	ActiveDatabases int64            `json:"activeDatabases" example:"140"`
	DnsRecords      int64            `json:"dnsRecords" example:"40"`
	WfautoAccounts  int64            `json:"wfautoAccounts" example:"30"`
	AiKeys          int64            `json:"aiKeys" example:"55"`
	Engines         int64            `json:"engines" example:"2"`
	Other           map[string]int64 `json:"other,omitempty" doc:"Counts of modules added later, by name."`
	GeneratedAt     time.Time        `json:"generatedAt" doc:"When the counts were taken; they are cached for at most 60 s."`
}

// Metrics returns the counts, taken at most ttl ago. Once they are half the ttl old, a request
// still answers from the cache and starts one recount in the background, so under steady traffic
// no request waits for a recount (whole-table counts: hundreds of milliseconds at a million rows).
func (o *Overview) Metrics(ctx context.Context) (PlatformMetrics, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if age := time.Since(o.cachedAt); !o.cachedAt.IsZero() && age < o.ttl {
		if age >= o.ttl/2 && !o.refreshing && o.life.Err() == nil {
			o.refreshing = true
			o.background.Add(1)
			go o.refresh(o.life)
		}
		return o.cached, nil
	}
	m, err := o.count(ctx)
	if err != nil {
		return m, err
	}
	o.cached, o.cachedAt = m, time.Now()
	return m, nil
}

// refresh recounts in the background; a failure leaves the cache to expire and the next request
// to count (and answer the error).
func (o *Overview) refresh(ctx context.Context) {
	defer o.background.Done()
	ctx, cancel := context.WithTimeout(ctx, o.ttl/2)
	defer cancel()
	m, err := o.count(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refreshing = false
	if err == nil {
		o.cached, o.cachedAt = m, time.Now()
	}
}

// count takes the counts: one query for users, and one per module counter (each module counts its
// own table in one query).
func (o *Overview) count(ctx context.Context) (PlatformMetrics, error) {
	m := PlatformMetrics{Other: map[string]int64{}}
	n, err := o.db.NewSelect().Table("users").Where("deleted_at IS NULL").Count(ctx)
	if err != nil {
		return m, fmt.Errorf("count users: %w", err)
	}
	m.Users = int64(n)
	for _, c := range o.counters {
		counts, err := c.PlatformCounts(ctx)
		if err != nil {
			return m, fmt.Errorf("platform counts: %w", err)
		}
		for k, v := range counts {
			switch k {
			case "databases":
				m.Databases = v
			case "activeDatabases":
				m.ActiveDatabases = v
			case "dnsRecords":
				m.DnsRecords = v
			case "wfautoAccounts":
				m.WfautoAccounts = v
			case "aiKeys":
				m.AiKeys = v
			case "engines":
				m.Engines = v
			default:
				m.Other[k] = v
			}
		}
	}
	if len(m.Other) == 0 {
		m.Other = nil
	}
	m.GeneratedAt = time.Now().UTC()
	return m, nil
}
