package aikeys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun"
)

// Meter accumulates usage per key in memory and writes it in batches: one UPDATE … FROM (VALUES
// …) per flush, never a database write per request. Flushed every interval and at shutdown.
type Meter struct {
	db       *bun.DB
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	pending map[int64]*delta
	hours   map[hourKey]*hourDelta // per key and hour, for usage over time (hourly.go)

	stop chan struct{}
	done chan struct{}
}

type delta struct {
	ID               int64     `bun:"id"`
	Requests         int64     `bun:"requests"`
	PromptTokens     int64     `bun:"prompt_tokens"`
	CompletionTokens int64     `bun:"completion_tokens"`
	LastUsedAt       time.Time `bun:"last_used_at"`
}

// NewMeter builds a Meter.
func NewMeter(db *bun.DB, log *slog.Logger, interval time.Duration) *Meter {
	return &Meter{db: db, log: log, interval: interval, pending: map[int64]*delta{}, hours: map[hourKey]*hourDelta{}}
}

// satAdd adds two counts (never negative) without wrapping: past math.MaxInt64 it stays there.
func satAdd(a, b int64) int64 {
	if b > math.MaxInt64-a {
		return math.MaxInt64
	}
	return a + b
}

// Add records one request's usage; prompt and completion are sanitised figures (usageFigure:
// never negative, at most maxAnswerTokens), and the sums saturate instead of wrapping.
func (m *Meter) Add(keyID int64, prompt, completion int64) {
	m.mu.Lock()
	d, ok := m.pending[keyID]
	if !ok {
		d = &delta{ID: keyID}
		m.pending[keyID] = d
	}
	d.Requests = satAdd(d.Requests, 1)
	d.PromptTokens = satAdd(d.PromptTokens, max(prompt, 0))
	d.CompletionTokens = satAdd(d.CompletionTokens, max(completion, 0))
	d.LastUsedAt = time.Now().UTC()
	m.addHour(keyID, d.LastUsedAt, 1, max(prompt, 0), max(completion, 0), 0)
	m.mu.Unlock()
}

// Flush writes what accumulated, the keys' totals and their hours; on failure the deltas are
// kept for the next flush.
func (m *Meter) Flush(ctx context.Context) error {
	return errors.Join(m.flushTotals(ctx), m.flushHours(ctx))
}

// flushTotals adds the deltas to the keys' totals (ai_keys).
func (m *Meter) flushTotals(ctx context.Context) error {
	m.mu.Lock()
	if len(m.pending) == 0 {
		m.mu.Unlock()
		return nil
	}
	batch := make([]delta, 0, len(m.pending))
	for _, d := range m.pending {
		batch = append(batch, *d)
	}
	m.pending = map[int64]*delta{}
	m.mu.Unlock()

	err := m.write(ctx, batch)
	if err != nil && len(batch) > 1 {
		// One entry must never hold back the others: each is written on its own, an entry the
		// database refuses as data (SQLSTATE class 22) is dropped and logged, and the rest is
		// kept for the next flush only when the database itself fails (then it fails for all).
		var keep []delta
		var failed error
		for i, d := range batch {
			e := m.write(ctx, batch[i:i+1])
			if e != nil && isDataError(e) {
				m.drop(d, e)
			} else if e != nil {
				keep, failed = batch[i:], e
				break
			}
		}
		err = failed
		batch = keep
	} else if err != nil && isDataError(err) {
		m.drop(batch[0], err)
		return nil
	}
	if err != nil {
		m.requeue(batch)
		return fmt.Errorf("flush ai key usage: %w", err)
	}
	return nil
}

// write adds the deltas to their keys in one statement. The sums are taken in numeric and capped
// at bigint's maximum, so no figure can make the statement fail with "bigint out of range".
func (m *Meter) write(ctx context.Context, batch []delta) error {
	_, err := m.db.NewUpdate().With("_d", m.db.NewValues(&batch)).
		Table("ai_keys").TableExpr("_d").
		Set("requests = LEAST(ai_keys.requests::numeric + _d.requests, 9223372036854775807)::bigint").
		Set("prompt_tokens = LEAST(ai_keys.prompt_tokens::numeric + _d.prompt_tokens, 9223372036854775807)::bigint").
		Set("completion_tokens = LEAST(ai_keys.completion_tokens::numeric + _d.completion_tokens, 9223372036854775807)::bigint").
		Set("last_used_at = GREATEST(ai_keys.last_used_at, _d.last_used_at)").
		Where("ai_keys.id = _d.id").Exec(ctx)
	return err
}

// isDataError reports whether the database refused the values themselves (SQLSTATE class 22:
// out of range, invalid value), which writing them again will not cure.
func isDataError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22")
}

// drop logs a delta the database refused as data; it is not kept, so it cannot block the others.
func (m *Meter) drop(d delta, err error) {
	m.log.Error("ai key usage dropped: the database refused it", "keyId", d.ID, "requests", d.Requests,
		"promptTokens", d.PromptTokens, "completionTokens", d.CompletionTokens, "error", err.Error())
}

// requeue puts deltas that could not be written back, merged with what accumulated meanwhile.
func (m *Meter) requeue(batch []delta) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, d := range batch {
		cur, ok := m.pending[d.ID]
		if !ok {
			dd := d
			m.pending[d.ID] = &dd
			continue
		}
		cur.Requests = satAdd(cur.Requests, d.Requests)
		cur.PromptTokens = satAdd(cur.PromptTokens, d.PromptTokens)
		cur.CompletionTokens = satAdd(cur.CompletionTokens, d.CompletionTokens)
		if d.LastUsedAt.After(cur.LastUsedAt) {
			cur.LastUsedAt = d.LastUsedAt
		}
	}
}

// Start flushes every interval until Stop.
func (m *Meter) Start() {
	m.stop, m.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.done)
		t := time.NewTicker(m.interval)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				if err := m.Flush(context.Background()); err != nil {
					m.log.Warn("ai key usage flush failed; kept for the next one", "error", err.Error())
				}
			}
		}
	}()
}

// Stop ends the loop and flushes what is left.
func (m *Meter) Stop(ctx context.Context) error {
	if m.stop != nil {
		close(m.stop)
		<-m.done
	}
	return m.Flush(ctx)
}
