// Package audit records append-only audit events. Every module writes through Recorder.Record; the
// actor, IP and user agent are taken from the request context when the event does not set them.
package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/reqctx"
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
	ns  SystemNamespaces
}

// NewRecorder builds a Recorder on the control database for the service's namespaces.
func NewRecorder(db bun.IDB, log *slog.Logger, ns SystemNamespaces) *Recorder {
	if log == nil {
		log = slog.Default()
	}
	return &Recorder{db: db, log: log, ns: NewSystemNamespaces(ns...)}
}

// Reserved reports whether action is in one of the service's namespaces (SystemNamespaces.Reserved).
func (r *Recorder) Reserved(action string) bool { return r.ns.Reserved(action) }

// ReservedMessage explains an action refused for being in one of the service's namespaces.
func (r *Recorder) ReservedMessage() string { return r.ns.ReservedMessage() }

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
// It stores the service's own events only: an action outside the SystemNamespaces is refused (an
// error naming it), so a module that records a namespace it did not declare fails its first
// test instead of leaving its events open to imitation by an Admin's note (StoredNote).
func (r *Recorder) Stored(ctx context.Context, tx bun.IDB, e Event) (Event, error) {
	if !r.ns.Reserved(e.Action) {
		return e, fmt.Errorf("record audit event %q: its namespace is not in audit.SystemNamespaces: "+
			"declare it in the module's AuditNamespaces (module.Module)", e.Action)
	}
	return r.store(ctx, tx, e)
}

// StoredNote stores an event an Admin writes by hand (a note): its action must not be in
// SystemNamespaces (see Reserved), so it cannot pass for one the service recorded.
func (r *Recorder) StoredNote(ctx context.Context, tx bun.IDB, e Event) (Event, error) {
	if r.ns.Reserved(e.Action) {
		return e, fmt.Errorf("record note %q: the action %s", e.Action, r.ns.ReservedMessage())
	}
	return r.store(ctx, tx, e)
}

func (r *Recorder) store(ctx context.Context, tx bun.IDB, e Event) (Event, error) {
	if e.ActorUserID == nil {
		if c := reqctx.CallerOf(ctx); c != nil {
			id := c.CallerID()
			e.ActorUserID = &id
		}
	}
	if e.UserID == nil && e.ActorUserID != nil {
		id := *e.ActorUserID
		e.UserID = &id
	}
	if e.IP == "" {
		e.IP = reqctx.ClientIP(ctx)
	}
	if e.UserAgent == "" {
		e.UserAgent = reqctx.UserAgent(ctx)
	}
	text, err := prepare(&e)
	if err != nil {
		return e, fmt.Errorf("record audit event %q: %w", e.Action, err)
	}
	if e.OccurredAt.IsZero() {
		e.OccurredAt = time.Now().UTC()
	}
	// PostgreSQL keeps microseconds: the event answered is the event a later read answers.
	e.OccurredAt = e.OccurredAt.Truncate(time.Microsecond)
	// The details go in as one string literal cast to jsonb, not through bun's AppendJSON, which
	// rewrites the JSON escapes of a backslash followed by "u0000" into text PostgreSQL refuses.
	if _, err := tx.NewInsert().Model(&e).Value("details", "?::jsonb", text).Returning("id").Exec(ctx); err != nil {
		return e, fmt.Errorf("record audit event %q: %w", e.Action, err)
	}
	return e, nil
}

// Amend stores the action, target and details of e over the stored event with e's id (an
// administrator's correction), kept as Stored keeps them; e becomes what was stored.
func Amend(ctx context.Context, tx bun.IDB, e *Event) error {
	text, err := prepare(e)
	if err != nil {
		return fmt.Errorf("amend audit event %d: %w", e.ID, err)
	}
	if _, err := tx.NewUpdate().Model(e).Column("action", "target_type", "target_id").Set("details = ?::jsonb", text).
		WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("amend audit event %d: %w", e.ID, err)
	}
	return nil
}

// prepare makes e storable: NUL (which PostgreSQL text and jsonb cannot hold) becomes U+FFFD in
// the text fields, e.Details becomes what the database will hold, and the returned JSON text is
// what to store.
func prepare(e *Event) (string, error) {
	for _, f := range []*string{&e.Action, &e.TargetType, &e.TargetID, &e.IP, &e.UserAgent} {
		*f = strings.ReplaceAll(*f, "\x00", "\uFFFD")
	}
	details, text, err := storable(e.Details)
	if err != nil {
		return "", err
	}
	e.Details = details
	return text, nil
}

// storable returns details as they can be stored and read back (its JSON round trip, with every
// NUL character, which PostgreSQL's jsonb and text cannot hold, replaced by U+FFFD) and their JSON
// text. Anything else a user typed (quotes, backslashes, the six characters \u0000) is kept.
func storable(details map[string]any) (map[string]any, string, error) {
	if details == nil {
		return map[string]any{}, "{}", nil
	}
	raw, err := json.Marshal(details)
	if err != nil {
		return nil, "", fmt.Errorf("details: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		return nil, "", fmt.Errorf("details: %w", err)
	}
	out, _ := withoutNUL(v).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	if raw, err = json.Marshal(out); err != nil {
		return nil, "", fmt.Errorf("details: %w", err)
	}
	return out, string(raw), nil
}

// withoutNUL replaces NUL in every string and key of a decoded JSON value.
func withoutNUL(v any) any {
	switch x := v.(type) {
	case string:
		return strings.ReplaceAll(x, "\x00", "\uFFFD")
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, val := range x {
			m[strings.ReplaceAll(k, "\x00", "\uFFFD")] = withoutNUL(val)
		}
		return m
	case []any:
		for i := range x {
			x[i] = withoutNUL(x[i])
		}
		return x
	default:
		return v
	}
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
