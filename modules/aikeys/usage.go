package aikeys

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"provisioner/platform/fault"
)

// Bucket is the usage of one hour or day (UTC).
type Bucket struct {
	Start            time.Time `json:"start"`
	Requests         int64     `json:"requests"`
	PromptTokens     int64     `json:"promptTokens"`
	CompletionTokens int64     `json:"completionTokens"`
	Refused          int64     `json:"refused"`
}

// UsageQuery is the window of a usage request.
type UsageQuery struct {
	From        time.Time `query:"from"`
	To          time.Time `query:"to"`
	Granularity string    `query:"granularity" enum:"hour,day" default:"hour"`
}

// maxBuckets bounds a usage answer.
const maxBuckets = 24 * 31

// window answers the query's bounds, or a 400.
func (q UsageQuery) window() (time.Time, time.Time, string, error) {
	gran := q.Granularity
	if gran == "" {
		gran = "hour"
	}
	step := time.Hour
	if gran == "day" {
		step = 24 * time.Hour
	}
	to := q.To
	if to.IsZero() {
		to = time.Now()
	}
	from := q.From
	if from.IsZero() {
		from = to.Add(-24 * time.Hour)
		if gran == "day" {
			from = to.Add(-30 * 24 * time.Hour)
		}
	}
	if !from.Before(to) {
		return from, to, gran, fault.Invalid("Validation failed", fault.FieldError{Field: "from", Message: "must be before to"})
	}
	if to.Sub(from) > maxBuckets*step {
		return from, to, gran, fault.Invalid("Validation failed", fault.FieldError{Field: "from", Message: fmt.Sprintf("at most %d buckets per request", maxBuckets)})
	}
	return from.UTC(), to.UTC(), gran, nil
}

// Usage answers the buckets of the keys of userID (keyID 0: all of them) that saw use in
// [from, to): the hours written so far (the meter flushes about every second).
func (s *Keys) Usage(ctx context.Context, userID, keyID int64, q UsageQuery) ([]Bucket, error) {
	from, to, gran, err := q.window()
	if err != nil {
		return nil, err
	}
	if keyID != 0 {
		var owner int64
		err := s.db.NewSelect().Model((*Key)(nil)).Column("user_id").Where("id = ?", keyID).Scan(ctx, &owner)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && owner != userID) {
			return nil, fault.NotFound("AI key not found")
		}
		if err != nil {
			return nil, fmt.Errorf("find ai key %d: %w", keyID, err)
		}
	}
	out := []Bucket{}
	err = s.db.NewRaw(`SELECT date_trunc(?, u.hour AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AS start,
  sum(u.requests)::bigint AS requests, sum(u.prompt_tokens)::bigint AS prompt_tokens,
  sum(u.completion_tokens)::bigint AS completion_tokens, sum(u.refused)::bigint AS refused
FROM ai_key_usage_hourly u JOIN ai_keys k ON k.id = u.key_id
WHERE k.user_id = ? AND (? = 0 OR u.key_id = ?) AND u.hour >= date_trunc(?, ?::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' AND u.hour < ?
GROUP BY 1 ORDER BY 1`, gran, userID, keyID, keyID, gran, from, to).Scan(ctx, &out)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("read ai key usage: %w", err)
	}
	for i := range out {
		out[i].Start = out[i].Start.UTC()
	}
	return out, nil
}
