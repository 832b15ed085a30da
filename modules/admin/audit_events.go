package admin

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/paging"
)

// AuditEvents lets administrators read and curate the audit log. Every change to an event is
// itself recorded as a new event that keeps the original.
type AuditEvents struct {
	db    *bun.DB
	audit *audit.Recorder
}

// AuditFilter narrows the audit list.
type AuditFilter struct {
	UserID   int64
	Action   string
	From, To time.Time
	ToGiven  bool // To applies even when it is the zero time (0001-01-01T00:00:00Z: nothing is before it)
	paging.PageQuery
}

// List returns one page of events, newest first.
func (s *AuditEvents) List(ctx context.Context, f AuditFilter) (paging.Page[audit.Event], error) {
	var rows []audit.Event
	q := s.db.NewSelect().Model(&rows)
	if f.UserID > 0 {
		q = q.Where("user_id = ?", f.UserID)
	}
	if f.Action != "" {
		q = q.Where("action = ?", f.Action)
	}
	if !f.From.IsZero() {
		q = q.Where("occurred_at >= ?", f.From)
	}
	if f.ToGiven || !f.To.IsZero() {
		q = q.Where("occurred_at < ?", f.To)
	}
	total, exact, err := db.Page(ctx, q, &rows, "occurred_at DESC, id DESC", f.PageQuery)
	if err != nil {
		return paging.Page[audit.Event]{}, fmt.Errorf("list audit events: %w", err)
	}
	return paging.NewPage(f.PageQuery, rows, total).Counted(exact), nil
}

// Get returns one event or 404.
func (s *AuditEvents) Get(ctx context.Context, id int64) (*audit.Event, error) {
	return s.get(ctx, s.db, id, false)
}

// get reads one event or 404; lock takes it FOR UPDATE, so that an amendment or deletion starts
// from the event as another Admin's amendment or deletion committed it (or finds it gone: 404),
// instead of writing over that change from what it read before.
func (s *AuditEvents) get(ctx context.Context, db bun.IDB, id int64, lock bool) (*audit.Event, error) {
	e := new(audit.Event)
	q := db.NewSelect().Model(e).Where("id = ?", id)
	if lock {
		q = q.For("UPDATE")
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fault.NotFound("Audit event not found")
		}
		return nil, fmt.Errorf("get audit event %d: %w", id, err)
	}
	return e, nil
}

// NoteInput is a manual audit note, or the fields of an update (nil = no change).
type NoteInput struct {
	Action     *string
	TargetType *string
	TargetID   *string
	Details    map[string]any
	UserID     *int64
}

// validate refuses an action that is not plain dotted ASCII or is in the service's own namespaces
// (an admin could otherwise forge, say, an aikey.rotated event, or "dаtabase.created" with a
// Cyrillic а; renaming is left alone when the action does not change) and details
// nested too deeply or too long.
func (s *AuditEvents) validate(in NoteInput, current string) error {
	var invalid []fault.FieldError
	if in.Action != nil && *in.Action != current {
		if msg := audit.ClientActionProblem(*in.Action); msg != "" {
			invalid = append(invalid, fault.FieldError{Field: "action", Message: msg})
		} else if s.audit.Reserved(*in.Action) {
			invalid = append(invalid, fault.FieldError{Field: "action", Message: s.audit.ReservedMessage()})
		}
	}
	if in.Details != nil {
		if msg := audit.ClientDetailsProblem(in.Details); msg != "" {
			invalid = append(invalid, fault.FieldError{Field: "details", Message: msg})
		}
	}
	if len(invalid) > 0 {
		return fault.Invalid("Validation failed", invalid...)
	}
	return nil
}

// Create records a manual note by the acting admin.
func (s *AuditEvents) Create(ctx context.Context, in NoteInput) (*audit.Event, error) {
	if err := s.validate(in, ""); err != nil {
		return nil, err
	}
	e := audit.Event{Action: deref(in.Action), TargetType: deref(in.TargetType), TargetID: deref(in.TargetID),
		Details: in.Details, UserID: in.UserID}
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	e.Details["manual"] = true
	var stored audit.Event
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) (err error) {
		if in.UserID != nil {
			// A note about a user names one the service has or had (a deleted account's row stays).
			exists, err := tx.NewSelect().Table("users").Where("id = ?", *in.UserID).Exists(ctx)
			if err != nil {
				return fmt.Errorf("look up user %d: %w", *in.UserID, err)
			}
			if !exists {
				return fault.Invalid("Validation failed", fault.FieldError{Field: "userId", Message: "names no user"})
			}
		}
		stored, err = s.audit.StoredNote(ctx, tx, e)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &stored, nil
}

// Update changes an event and records audit.event.updated holding the original (details.original)
// and the fields the change set (details.updated: action, targetType, targetId, details, each
// only when sent; details as stored, with the markers).
// The event is marked details.amended (and keeps details.manual when it was a manual note).
func (s *AuditEvents) Update(ctx context.Context, id int64, in NoteInput) (*audit.Event, error) {
	var out *audit.Event
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		e, err := s.get(ctx, tx, id, true)
		if err != nil {
			return err
		}
		original := *e
		if err := s.validate(in, e.Action); err != nil {
			return err
		}
		if unchanged(original, in) {
			// Nothing to amend ({}, or the values the event already has): the event stays as it
			// is, unmarked, and no audit.event.updated is written, as for a user's no-op update.
			out = e
			return nil
		}
		if in.Action != nil {
			e.Action = *in.Action
		}
		if in.TargetType != nil {
			e.TargetType = *in.TargetType
		}
		if in.TargetID != nil {
			e.TargetID = *in.TargetID
		}
		if in.Details != nil {
			e.Details = in.Details
		}
		// An amended event says so in itself, whatever its new details: an event the service
		// recorded keeps its action, and must not read as recorded so once an Admin rewrote it.
		// The markers are the service's: a manual note stays marked manual, and an event the
		// service recorded never becomes one (a "manual" the change sends is dropped).
		details := make(map[string]any, len(e.Details)+2)
		for k, v := range e.Details {
			details[k] = v
		}
		details["amended"] = true
		delete(details, "manual")
		if wasManual(original) {
			details["manual"] = true
		}
		e.Details = details
		if err := audit.Amend(ctx, tx, e); err != nil {
			return err
		}
		out = e
		// The record holds the original whole, and of the change only what it set: the whole
		// amended event as well (which, for a record of an earlier change, holds that one's original
		// again) made each amendment of the latest record twice its size, 1 GB after some 14 `{}`s.
		updated := map[string]any{}
		if in.Action != nil {
			updated["action"] = e.Action
		}
		if in.TargetType != nil {
			updated["targetType"] = e.TargetType
		}
		if in.TargetID != nil {
			updated["targetId"] = e.TargetID
		}
		if in.Details != nil {
			updated["details"] = e.Details
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "audit.event.updated", TargetType: "auditEvent",
			TargetID: fmt.Sprint(id), Details: map[string]any{"original": audit.MarshalDetails(original), "updated": updated}})
	})
	return out, err
}

// Delete removes an event and records audit.event.deleted holding the original.
func (s *AuditEvents) Delete(ctx context.Context, id int64) error {
	return db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		e, err := s.get(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if _, err := tx.NewDelete().Model(e).WherePK().Exec(ctx); err != nil {
			return fmt.Errorf("delete audit event %d: %w", id, err)
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "audit.event.deleted", TargetType: "auditEvent",
			TargetID: fmt.Sprint(id), Details: map[string]any{"original": audit.MarshalDetails(*e)}})
	})
}

// wasManual tells whether e is a note an Admin recorded (details.manual).
func wasManual(e audit.Event) bool {
	manual, _ := e.Details["manual"].(bool)
	return manual
}

// unchanged tells whether in would leave e as it is: every field it sends already holds that
// value, and its details (if sent) are e's, both read without the service's markers (amended,
// manual), so an event sent back as read is no change.
func unchanged(e audit.Event, in NoteInput) bool {
	if (in.Action != nil && *in.Action != e.Action) || (in.TargetType != nil && *in.TargetType != e.TargetType) ||
		(in.TargetID != nil && *in.TargetID != e.TargetID) {
		return false
	}
	if in.Details == nil {
		return true
	}
	withoutMarkers := func(d map[string]any) []byte {
		m := make(map[string]any, len(d))
		for k, v := range d {
			if k != "amended" && k != "manual" {
				m[k] = v
			}
		}
		b, _ := json.Marshal(m) // sorted keys: equal maps give equal bytes
		return b
	}
	return bytes.Equal(withoutMarkers(in.Details), withoutMarkers(e.Details))
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
