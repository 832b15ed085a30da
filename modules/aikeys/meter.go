package aikeys

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

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
	return &Meter{db: db, log: log, interval: interval, pending: map[int64]*delta{}}
}

// Add records one request's usage.
func (m *Meter) Add(keyID int64, prompt, completion int64) {
	m.mu.Lock()
	d, ok := m.pending[keyID]
	if !ok {
		d = &delta{ID: keyID}
		m.pending[keyID] = d
	}
	d.Requests++
	d.PromptTokens += prompt
	d.CompletionTokens += completion
	d.LastUsedAt = time.Now().UTC()
	m.mu.Unlock()
}

// Flush writes what accumulated; on failure the deltas are kept for the next flush.
func (m *Meter) Flush(ctx context.Context) error {
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

	_, err := m.db.NewUpdate().With("_d", m.db.NewValues(&batch)).
		Table("ai_keys").TableExpr("_d").
		Set("requests = ai_keys.requests + _d.requests").
		Set("prompt_tokens = ai_keys.prompt_tokens + _d.prompt_tokens").
		Set("completion_tokens = ai_keys.completion_tokens + _d.completion_tokens").
		Set("last_used_at = GREATEST(ai_keys.last_used_at, _d.last_used_at)").
		Where("ai_keys.id = _d.id").Exec(ctx)
	if err != nil {
		m.mu.Lock()
		for _, d := range batch {
			cur, ok := m.pending[d.ID]
			if !ok {
				dd := d
				m.pending[d.ID] = &dd
				continue
			}
			cur.Requests += d.Requests
			cur.PromptTokens += d.PromptTokens
			cur.CompletionTokens += d.CompletionTokens
			if d.LastUsedAt.After(cur.LastUsedAt) {
				cur.LastUsedAt = d.LastUsedAt
			}
		}
		m.mu.Unlock()
		return fmt.Errorf("flush ai key usage: %w", err)
	}
	return nil
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
