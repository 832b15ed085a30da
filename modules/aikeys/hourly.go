package aikeys

import (
	"context"
	"fmt"
	"time"
)

// hourKey names one key's hour (UTC, unix seconds of its start).
type hourKey struct {
	keyID int64
	hour  int64
}

// hourDelta is what one key did in one hour since the last flush.
type hourDelta struct {
	KeyID            int64     `bun:"key_id"`
	Hour             time.Time `bun:"hour"`
	Requests         int64     `bun:"requests"`
	PromptTokens     int64     `bun:"prompt_tokens"`
	CompletionTokens int64     `bun:"completion_tokens"`
	Refused          int64     `bun:"refused"`
}

// hourOf is the hour holding t.
func hourOf(keyID int64, t time.Time) hourKey {
	return hourKey{keyID: keyID, hour: t.Unix() - t.Unix()%3600}
}

// addHour adds to one key's hour; m.mu is held.
func (m *Meter) addHour(keyID int64, now time.Time, requests, prompt, completion, refused int64) {
	k := hourOf(keyID, now)
	d, ok := m.hours[k]
	if !ok {
		d = &hourDelta{KeyID: keyID, Hour: time.Unix(k.hour, 0).UTC()}
		m.hours[k] = d
	}
	d.Requests = satAdd(d.Requests, requests)
	d.PromptTokens = satAdd(d.PromptTokens, prompt)
	d.CompletionTokens = satAdd(d.CompletionTokens, completion)
	d.Refused = satAdd(d.Refused, refused)
}

// Refused counts a request of keyID the gateway refused (a model not allowed, a budget reached).
func (m *Meter) Refused(keyID int64) {
	m.mu.Lock()
	m.addHour(keyID, time.Now(), 0, 0, 0, 1)
	m.mu.Unlock()
}

// flushHours writes the hours that accumulated in one statement; on failure they are kept for the
// next flush (merged with what came meanwhile).
func (m *Meter) flushHours(ctx context.Context) error {
	m.mu.Lock()
	if len(m.hours) == 0 {
		m.mu.Unlock()
		return nil
	}
	batch := make([]hourDelta, 0, len(m.hours))
	for _, d := range m.hours {
		batch = append(batch, *d)
	}
	m.hours = map[hourKey]*hourDelta{}
	m.mu.Unlock()
	_, err := m.db.NewInsert().Model(&batch).ModelTableExpr("ai_key_usage_hourly").
		On("CONFLICT (key_id, hour) DO UPDATE").
		Set("requests = LEAST(ai_key_usage_hourly.requests::numeric + EXCLUDED.requests, 9223372036854775807)::bigint").
		Set("prompt_tokens = LEAST(ai_key_usage_hourly.prompt_tokens::numeric + EXCLUDED.prompt_tokens, 9223372036854775807)::bigint").
		Set("completion_tokens = LEAST(ai_key_usage_hourly.completion_tokens::numeric + EXCLUDED.completion_tokens, 9223372036854775807)::bigint").
		Set("refused = LEAST(ai_key_usage_hourly.refused::numeric + EXCLUDED.refused, 9223372036854775807)::bigint").
		Exec(ctx)
	if err == nil {
		return nil
	}
	if isDataError(err) { // a value the database refuses: writing it again will not cure it
		m.log.Error("ai key hourly usage dropped: the database refused it", "rows", len(batch), "error", err.Error())
		return nil
	}
	m.mu.Lock()
	for _, d := range batch {
		k := hourOf(d.KeyID, d.Hour)
		cur, ok := m.hours[k]
		if !ok {
			dd := d
			m.hours[k] = &dd
			continue
		}
		cur.Requests = satAdd(cur.Requests, d.Requests)
		cur.PromptTokens = satAdd(cur.PromptTokens, d.PromptTokens)
		cur.CompletionTokens = satAdd(cur.CompletionTokens, d.CompletionTokens)
		cur.Refused = satAdd(cur.Refused, d.Refused)
	}
	m.mu.Unlock()
	return fmt.Errorf("flush ai key hourly usage: %w", err)
}
