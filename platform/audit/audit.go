// Package audit records append-only audit events. Every module writes through Recorder.Record; the
// actor, IP and user agent are taken from the request context when the event does not set them.
package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
)

// Event is one audit record.
type Event struct {
	bun.BaseModel `bun:"table:audit_events"`

	ID          int64          `bun:"id,pk,autoincrement" json:"id"`
	OccurredAt  time.Time      `bun:"occurred_at,nullzero,notnull,default:current_timestamp" json:"occurredAt"`
	ActorUserID *int64         `bun:"actor_user_id" json:"actorUserId"`
	UserID      *int64         `bun:"user_id" json:"userId" doc:"The user the event is about."`
	Action      string         `bun:"action,notnull" json:"action" example:"database.password.revealed"`
	TargetType  string         `bun:"target_type,notnull" json:"targetType" example:"database"`
	TargetID    string         `bun:"target_id,notnull" json:"targetId" example:"42"`
	IP          string         `bun:"ip,notnull" json:"ip"`
	UserAgent   string         `bun:"user_agent,notnull" json:"userAgent"`
	Details     map[string]any `bun:"details,type:jsonb,notnull" json:"details"`
}

// Recorder writes audit events.
type Recorder struct {
	db  bun.IDB
	log *slog.Logger
}

// NewRecorder builds a Recorder on the control database.
func NewRecorder(db bun.IDB, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.Default()
	}
	return &Recorder{db: db, log: log}
}

// Record stores e. Empty ActorUserID, IP and UserAgent are filled from ctx; UserID defaults to the
// actor. Details must not contain secrets.
func (r *Recorder) Record(ctx context.Context, e Event) error {
	return r.RecordTx(ctx, r.db, e)
}

// RecordTx stores e within tx, so the event commits or rolls back with the change it describes.
func (r *Recorder) RecordTx(ctx context.Context, tx bun.IDB, e Event) error {
	_, err := r.Stored(ctx, tx, e)
	return err
}

// Stored is RecordTx returning the event as stored (with its id and the fields filled from ctx).
func (r *Recorder) Stored(ctx context.Context, tx bun.IDB, e Event) (Event, error) {
	if e.ActorUserID == nil {
		if p := authn.FromContext(ctx); p != nil {
			id := p.UserID
			e.ActorUserID = &id
		}
	}
	if e.UserID == nil && e.ActorUserID != nil {
		id := *e.ActorUserID
		e.UserID = &id
	}
	if e.IP == "" {
		e.IP = httpx.ClientIP(ctx)
	}
	if e.UserAgent == "" {
		e.UserAgent = httpx.UserAgent(ctx)
	}
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	if e.OccurredAt.IsZero() {
		e.OccurredAt = time.Now().UTC()
	}
	if _, err := tx.NewInsert().Model(&e).Returning("id").Exec(ctx); err != nil {
		return e, fmt.Errorf("record audit event %q: %w", e.Action, err)
	}
	return e, nil
}

// Try records e and logs (rather than returns) a failure: for events that must not fail the
// request they describe, such as a failed login.
func (r *Recorder) Try(ctx context.Context, e Event) {
	if err := r.Record(ctx, e); err != nil {
		r.log.WarnContext(ctx, "audit event not recorded", "action", e.Action, "error", err.Error())
	}
}

// Int64 returns a pointer to v, for the optional ids of an Event.
func Int64(v int64) *int64 { return &v }

// MarshalDetails is a helper turning a struct into the details map.
func MarshalDetails(v any) map[string]any {
	b, err := json.Marshal(v)
	if err != nil {
		return map[string]any{}
	}
	m := map[string]any{}
	_ = json.Unmarshal(b, &m)
	return m
}
