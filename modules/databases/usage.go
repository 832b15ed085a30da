package databases

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
)

// ReadOnlyResume is the fraction of the quota under which a read-only database is writable again.
const ReadOnlyResume = 0.9

// Usage refreshes used space and last activity of every live database, one query per engine and
// usageBatch databases, and switches databases over their quota to read-only (and back under
// 90%). One replica at a time refreshes (a PostgreSQL advisory lock).
type UsageRefresher struct {
	db       *bun.DB
	engines  *Engines
	audit    *audit.Recorder
	log      *slog.Logger
	interval time.Duration

	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	progress map[string]progress // by engine id
}

const usageLockKey = 7_310_442_101

// statsBudget bounds how long one refresh spends refreshing an engine's statistics.
const statsBudget = 10 * time.Second

// Start runs the refresher every interval until Stop.
func (u *UsageRefresher) Start() {
	u.stop = make(chan struct{})
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		u.checkServers()
		t := time.NewTicker(u.interval)
		defer t.Stop()
		for {
			select {
			case <-u.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), u.interval)
				if err := u.Refresh(ctx); err != nil {
					u.log.Warn("database usage refresh failed", "error", err.Error())
				}
				cancel()
			}
		}
	}()
}

// checkServers logs a WARN for each risky setting of an engine's server (serverChecker), once at
// start; a server that does not answer is not checked.
func (u *UsageRefresher) checkServers() {
	for _, e := range u.engines.All() {
		c, ok := e.(serverChecker)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		warnings, err := c.ServerWarnings(ctx)
		cancel()
		if err != nil {
			u.log.Warn("engine server settings not checked", "engine", e.ID(), "error", err.Error())
			continue
		}
		for _, w := range warnings {
			u.log.Warn(w, "engine", e.ID())
		}
	}
}

// Stop ends the loop.
func (u *UsageRefresher) Stop(context.Context) error {
	if u.stop != nil {
		close(u.stop)
		u.wg.Wait()
	}
	return nil
}

type usageRow struct {
	ID           int64      `bun:"id"`
	UserID       int64      `bun:"user_id"`
	Engine       string     `bun:"engine"`
	DatabaseName string     `bun:"database_name"`
	DatabaseUser string     `bun:"database_user"`
	UsedSpace    int64      `bun:"used_space_bytes"`
	MaxSpace     int64      `bun:"max_space_bytes"`
	ReadOnly     bool       `bun:"read_only"`
	Reason       string     `bun:"read_only_reason"`
	LastActivity *time.Time `bun:"last_activity"`
	MeasuredAt   *time.Time `bun:"usage_measured_at"` // nil: never measured
}

// Refresh reads every configured engine and records what changed. Each engine's live databases
// are taken usageBatch at a time, in id order, each batch measured in one query and recorded in
// one statement: a deployment with a million databases is never held in memory at once, and
// databases on an engine this process does not have are not read at all.
func (u *UsageRefresher) Refresh(ctx context.Context) error {
	engines := u.engines.All()
	if len(engines) == 0 {
		return nil
	}
	conn, err := u.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("usage refresh: %w", err)
	}
	defer conn.Close()
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock(?)", usageLockKey).Scan(&got); err != nil {
		return fmt.Errorf("usage lock: %w", err)
	}
	if !got {
		return nil // another replica is refreshing
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(?)", usageLockKey) //nolint:errcheck

	now := time.Now().UTC()
	// Each engine on its own: one that hangs (connections open, nothing answers) used the
	// refresh's whole time, and an engine asked after it was not measured at all.
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed error
	)
	for _, engine := range engines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := u.refreshBatches(ctx, engine, now); err != nil {
				mu.Lock()
				failed = errors.Join(failed, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed
}

// usageBatch is how many databases of an engine one step of a refresh reads, measures and records.
const usageBatch = 5000

// usageBatchesPerRefresh, when positive, cuts each engine's refresh after that many batches, as
// if its time had run out (a test hook).
var usageBatchesPerRefresh = 0

// minUsageBatch is the fewest databases a batch is cut down to (see refreshBatches).
const minUsageBatch = 50

// progress is where an engine's refreshes stand on this replica: the id after which the next
// starts (0: the lowest) and how many databases a batch takes.
type progress struct {
	after int64
	batch int64
}

// refreshBatches refreshes the live databases of engine a batch at a time, in id order from where
// this replica's previous refresh of it stopped, wrapping round to the lowest id: a refresh cut
// short (its time ran out, the engine stopped answering) leaves the rest to the next, which
// starts there, so on a slow engine every database is measured in turn. A batch the engine could
// not measure before the refresh's time ran out is halved (down to minUsageBatch) for the next
// try, and doubled back (up to usageBatch) by each refresh that goes round every database. A pass
// that measured every batch is reported to the engine (usagePass).
func (u *UsageRefresher) refreshBatches(ctx context.Context, engine Engine, now time.Time) error {
	at := u.progressOf(engine.ID())
	start := at.after
	wrapped := start == 0
	defer func() { u.setProgress(engine.ID(), at) }()
	named := false // a batch was measured
	for batches := 0; ; {
		var rows []usageRow
		q := u.db.NewSelect().Table("database_instances").
			Column("id", "user_id", "engine", "database_name", "database_user", "used_space_bytes", "max_space_bytes", "read_only", "read_only_reason", "last_activity", "usage_measured_at").
			Where("status IN ('Active', 'Paused')").Where("engine = ?", engine.ID()).Where("id > ?", at.after)
		if wrapped && start > 0 {
			q = q.Where("id <= ?", start)
		}
		if err := q.OrderExpr("id").Limit(at.batch).Scan(ctx, &rows); err != nil {
			return fmt.Errorf("list live databases of %s: %w", engine.ID(), err)
		}
		measured := true
		if len(rows) > 0 {
			var err error
			if measured, err = u.refreshEngine(ctx, engine, rows, now); err != nil {
				return err
			}
			named = named || measured
		}
		if measured && len(rows) > 0 {
			at.after = rows[len(rows)-1].ID
			batches++
		}
		switch {
		case !measured || ctx.Err() != nil || batches == usageBatchesPerRefresh && len(rows) > 0:
			if !measured && ctx.Err() != nil {
				at.batch = max(at.batch/2, minUsageBatch)
			}
			return nil
		case int64(len(rows)) == at.batch:
		case !wrapped: // the highest id is measured: on from the lowest up to where it started
			at.after, wrapped = 0, true
		default:
			if p, ok := engine.(usagePass); ok && named {
				p.usagePassDone()
			}
			at.after, at.batch = 0, min(at.batch*2, usageBatch)
			return nil
		}
	}
}

// progressOf is where engine's refreshes stand on this replica.
func (u *UsageRefresher) progressOf(engine string) progress {
	u.mu.Lock()
	defer u.mu.Unlock()
	if at, ok := u.progress[engine]; ok {
		return at
	}
	return progress{batch: usageBatch}
}

func (u *UsageRefresher) setProgress(engine string, at progress) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.progress == nil {
		u.progress = map[string]progress{}
	}
	u.progress[engine] = at
}

// refreshEngine measures the databases of one engine (list), switches those over or back under
// their quota, and records the figures. measured is false when the engine did not answer.
func (u *UsageRefresher) refreshEngine(ctx context.Context, engine Engine, list []usageRow, now time.Time) (measured bool, err error) {
	engineID := engine.ID()
	names := make([]string, len(list))
	var stale []string
	for i, r := range list {
		names[i] = r.DatabaseName
		if r.ReadOnly || r.UsedSpace > r.MaxSpace {
			stale = append(stale, r.DatabaseName)
		}
	}
	if sr, ok := engine.(statsRefresher); ok && len(stale) > 0 {
		// Read-only (or about to be) on figures that may be stale: the tenant cannot refresh
		// them, so a DELETE would never bring it back under its quota. Bounded to half of what
		// is left of this refresh, at most statsBudget.
		budget := statsBudget
		if dl, ok := ctx.Deadline(); ok && time.Until(dl)/2 < budget {
			budget = time.Until(dl) / 2
		}
		sctx, cancel := context.WithTimeout(ctx, budget)
		if err := sr.RefreshStats(sctx, stale); err != nil {
			u.log.Warn("engine statistics refresh failed", "engine", engineID, "error", err.Error())
		}
		cancel()
	}
	if g, ok := engine.(overQuotaGuard); ok && len(stale) > 0 {
		if err := g.GuardOverQuota(ctx, stale); err != nil {
			u.log.Warn("engine over-quota guard failed", "engine", engineID, "error", err.Error())
		}
	}
	usage, err := engine.Usage(ctx, names)
	if err != nil {
		u.log.Warn("engine usage unavailable", "engine", engineID, "error", err.Error())
		return false, nil
	}
	var values []usageRow
	for _, r := range list {
		us, ok := usage[r.DatabaseName]
		if !ok {
			continue
		}
		// Growth from the first figure is not activity: a fresh PostgreSQL database measures megabytes.
		if us.Active || (us.Bytes > r.UsedSpace && r.MeasuredAt != nil) {
			r.LastActivity = &now
		}
		r.UsedSpace, r.MeasuredAt = us.Bytes, &now
		if err := u.switchReadOnly(ctx, engine, &r, us.Unmeasured); err != nil {
			u.log.Warn("read-only switch failed", "id", r.ID, "error", err.Error())
		}
		values = append(values, r)
	}
	if len(values) == 0 {
		return true, nil
	}
	// One statement for every database of the batch, on a context of its own: what was
	// measured and switched is recorded even when the refresh's time ran out meanwhile.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordBudget)
	_, err = u.db.NewUpdate().With("_data", u.db.NewValues(&values)).
		Table("database_instances").TableExpr("_data").
		Set("used_space_bytes = _data.used_space_bytes").
		Set("last_activity = _data.last_activity").
		Set("usage_measured_at = _data.usage_measured_at").
		Set("read_only = _data.read_only").
		Set("read_only_reason = _data.read_only_reason").
		Where("database_instances.id = _data.id").Exec(rctx)
	cancel()
	if err != nil {
		return true, fmt.Errorf("record usage of %s: %w", engineID, err)
	}
	return true, nil
}

// switchBudget bounds one database's read-only switch, which is tried again at the next refresh
// when it fails (PostgreSQL gives up waiting for a tenant's lock sooner, see
// postgresEngine.SetReadOnly); recordBudget bounds recording an engine's figures.
const (
	switchBudget = 10 * time.Second
	recordBudget = 10 * time.Second
)

// switchReadOnly turns r read-only over its quota, or while it has tables whose size the engine
// does not report (unmeasured), and writable again under 90% of its quota with none left. It sets
// r.Reason to why it is read-only ("" when writable).
func (u *UsageRefresher) switchReadOnly(ctx context.Context, engine Engine, r *usageRow, unmeasured []string) error {
	want := r.ReadOnly
	switch {
	case len(unmeasured) > 0:
		want = true
	case !r.ReadOnly && r.UsedSpace > r.MaxSpace:
		want = true
	case r.ReadOnly && float64(r.UsedSpace) < ReadOnlyResume*float64(r.MaxSpace):
		want = false
	}
	reason := ""
	switch {
	case !want:
	case len(unmeasured) > 0:
		reason = ReasonUnmeasured + strings.Join(unmeasured, ", ")
	default:
		reason = ReasonOverQuota
	}
	// A database already read-only for its quota before such a table counted (one from before
	// read-only kept DROP) is switched again, so its users get DROP to remove the table.
	again := r.ReadOnly && want && len(unmeasured) > 0 && !strings.HasPrefix(r.Reason, ReasonUnmeasured)
	prev := r.Reason
	r.Reason = reason
	if want == r.ReadOnly && !again {
		return nil
	}
	// A context of its own: a switch that waited (another process changing the database's
	// catalogue, a tenant's lock) until the refresh's time ran out left none for the others.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), switchBudget)
	err := engine.SetReadOnly(sctx, r.DatabaseName, r.DatabaseUser, want)
	cancel()
	if err != nil {
		r.Reason = prev
		return err
	}
	if again {
		return nil
	}
	r.ReadOnly = want
	ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), recordBudget)
	defer cancel()
	action := "database.readonly.enabled"
	if !want {
		action = "database.readonly.disabled"
	}
	details := map[string]any{"usedSpaceBytes": r.UsedSpace, "maxSpaceBytes": r.MaxSpace}
	if len(unmeasured) > 0 {
		details["unmeasuredTables"] = unmeasured
	}
	return u.audit.Record(ctx, audit.Event{Action: action, UserID: audit.Int64(r.UserID), TargetType: "database",
		TargetID: fmt.Sprint(r.ID), Details: details})
}

// Why a database is read-only (Item.ReadOnlyReason).
const (
	ReasonOverQuota  = "Over its quota (usedSpaceBytes above maxSpaceBytes): writable again under 90% of it."
	ReasonUnmeasured = "Tables in a storage engine whose size the server does not report, which would grow unmeasured; writable again once they are dropped (DROP TABLE is kept): "
)
