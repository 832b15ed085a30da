package dns

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
)

// Kind is the provisioner kind of DNS records.
const Kind provision.Kind = "dns"

// Service manages the DNS cell's records: intent stored, provider called, outcome recorded.
type Service struct {
	db       *bun.DB
	cfg      Config
	audit    *audit.Recorder
	finisher *provision.Finisher
}

// CreateInput is a request for a record; nil fields take the configured defaults.
type CreateInput struct {
	UserID    int64
	Label     string
	Content   *string
	RecordTTL *int
	Proxied   *bool
}

func (s *Service) configured() bool { return s.cfg.Enabled() }

// names returns the provider name and the fqdn of label.
func (s *Service) names(label string) (name, fqdn string) {
	name = label
	if sub := strings.Trim(s.cfg.CellSubdomain, "."); sub != "" {
		name = label + "." + sub
	}
	fqdn = name
	if zone := strings.Trim(s.cfg.ZoneName, "."); zone != "" {
		fqdn = name + "." + zone
	}
	return strings.ToLower(name), strings.ToLower(fqdn)
}

// Create validates, stores the Pending intent and drives it once. It returns the record as it
// then stands and the attempt's error (nil when it ended Active or Failed).
func (s *Service) Create(ctx context.Context, in CreateInput) (*Record, error) {
	content := s.cfg.DefaultContent
	if in.Content != nil {
		content = strings.TrimSpace(*in.Content)
	}
	ttl := s.cfg.RecordTtl
	if in.RecordTTL != nil {
		ttl = *in.RecordTTL
	}
	proxied := s.cfg.Proxied
	if in.Proxied != nil {
		proxied = *in.Proxied
	}
	label, err := validate(in.Label, content, in.Content != nil && s.cfg.DefaultContent != "", ttl, s.cfg.AllowPrivateContent)
	if err != nil {
		return nil, err
	}
	if s.cfg.reserved(label) {
		return nil, httpx.Conflict(fmt.Sprintf("The name %q is reserved", label))
	}
	if !s.configured() {
		return nil, httpx.Unavailable("The DNS cell is not configured (Dns:ZoneId, Dns:ApiToken)")
	}
	ttl = sentTTL(ttl, proxied) // stored as the provider will hold it
	name, fqdn := s.names(label)
	// The request drives the row itself; the finisher leaves it alone for a minute (it finishes it
	// only if this request dies first).
	rec := &Record{UserID: in.UserID, Label: label, Name: name, Fqdn: fqdn, Content: content, RecordTTL: ttl,
		Proxied: proxied, Status: StatusPending, NextAttemptAt: time.Now().Add(time.Minute)}
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := s.roomFor(ctx, tx, in.UserID); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(rec).Returning("*").Exec(ctx); err != nil {
			if db.IsUniqueViolation(err) {
				return httpx.Conflict(fmt.Sprintf("The label %q is already in use in this cell", label))
			}
			return fmt.Errorf("store record intent: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	wctx, w := withWaiting(ctx, rec.ID, true)
	out, err := s.drive(wctx, rec.ID)
	if w.taken {
		return nil, nameTakenConflict(label, fqdn)
	}
	return out, err
}

// roomFor locks the user (a live one: 404 otherwise) and checks, under that lock, that one more
// live record (Pending, Active, Revoking) stays within Dns:MaxRecordsPerUser: 409 otherwise. Every
// path that makes a record live calls it: a create, and a retry of a Failed record (which does not
// count while Failed, so its user may have filled the quota meanwhile).
func (s *Service) roomFor(ctx context.Context, tx bun.Tx, userID int64) error {
	if err := db.LockLiveUser(ctx, tx, userID); err != nil {
		return err
	}
	n, err := tx.NewSelect().Model((*Record)(nil)).Where("user_id = ?", userID).
		Where("status IN (?)", bun.In([]string{StatusPending, StatusActive, StatusRevoking})).Count(ctx)
	if err != nil {
		return fmt.Errorf("count records: %w", err)
	}
	if n >= int64(s.cfg.MaxRecordsPerUser) {
		return httpx.Conflict(fmt.Sprintf("Quota reached: at most %d DNS records per user", s.cfg.MaxRecordsPerUser))
	}
	return nil
}

// nameTakenConflict is the 409 of a name the provider holds for a record not made by us.
func nameTakenConflict(label, fqdn string) *httpx.Error {
	return httpx.Conflict(fmt.Sprintf("The label %q is already in use: the DNS provider holds %s for a record not made for this one (another party's)", label, fqdn))
}

func (s *Service) drive(ctx context.Context, id int64) (*Record, error) {
	driveErr := s.finisher.DriveNow(ctx, Kind, id)
	out, err := s.get(context.WithoutCancel(ctx), id, 0)
	if err != nil {
		return nil, err
	}
	return out, driveErr
}

func (s *Service) get(ctx context.Context, id, userID int64) (*Record, error) {
	r := new(Record)
	q := s.db.NewSelect().Model(r).Where("id = ?", id)
	if userID != 0 {
		q = q.Where("user_id = ?", userID)
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, httpx.NotFound("DNS record not found")
		}
		return nil, fmt.Errorf("load record %d: %w", id, err)
	}
	return r, nil
}

// List returns the user's records, newest last: all but the Revoked ones. A revoked record is
// gone for its user (the administrators' list keeps the trace); so the list is bounded by the
// quota plus the Failed records, each of which the user can revoke.
func (s *Service) List(ctx context.Context, userID int64) ([]View, error) {
	var rows []Record
	if err := s.db.NewSelect().Model(&rows).Where("user_id = ?", userID).Where("status <> ?", StatusRevoked).
		OrderExpr("id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list records: %w", err)
	}
	out := make([]View, len(rows))
	for i := range rows {
		out[i] = view(&rows[i])
	}
	return out, nil
}

// Revoke deletes a record at the provider: Active/Pending/Failed → Revoking → Revoked. A Failed
// record goes through the provider too: its create may have reached the provider (an answer lost,
// then attempts run out), so the name is looked up and a record carrying this row's marker is
// deleted. It returns the record as it then stands and the attempt's error (the record stays
// Revoking for the finisher). A record already Revoking is driven again only once its next attempt
// is due: before that the provider is not called (its Retry-After, our backoff).
func (s *Service) Revoke(ctx context.Context, id, userID int64) (*Record, error) {
	waiting := false // a Revoking record whose next attempt is not due yet
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		r := new(Record)
		q := tx.NewSelect().Model(r).Where("id = ?", id).For("UPDATE")
		if userID != 0 {
			q = q.Where("user_id = ?", userID)
		}
		if err := q.Scan(ctx); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return httpx.NotFound("DNS record not found")
			}
			return fmt.Errorf("lock record %d: %w", id, err)
		}
		switch r.Status {
		case StatusRevoked:
			return httpx.Conflict("The record is already revoked")
		case StatusRevoking:
			// Already being revoked. While its next attempt is not due (the finisher's backoff,
			// or the provider's Retry-After), asking again does not call the provider: the answer
			// is the record as it stands (502, Retry-After: the remaining wait).
			waiting = r.NextAttemptAt.After(time.Now())
			return nil
		case StatusFailed:
			// A Failed record does not hold its label; another live record may have taken it. Then
			// this one cannot be Revoking (one live row per label): it is Revoked at once, and a sweep
			// deletes at the provider whatever record of its own its create may have left (only a
			// record carrying its marker, never the other one's), as for a deleted user's.
			taken, err := tx.NewSelect().Model((*Record)(nil)).Where("label = ?", r.Label).Where("id <> ?", r.ID).
				Where("status IN (?)", bun.In([]string{StatusPending, StatusActive, StatusRevoking})).Exists(ctx)
			if err != nil {
				return fmt.Errorf("find the live record of label %q: %w", r.Label, err)
			}
			if taken {
				if err := queueSweeps(ctx, tx, "r.id = ?", r.ID); err != nil {
					return err
				}
				if _, err := tx.NewUpdate().Model(r).Set("status = ?", StatusRevoked).Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
					return err
				}
				break
			}
			if _, err := tx.NewUpdate().Model(r).Set("status = ?", StatusRevoking).Set("attempts = 0").Set("error_message = ''").
				Set("last_error = ''").Set("next_attempt_at = now()").Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
				if db.IsUniqueViolation(err) {
					return httpx.Conflict(fmt.Sprintf("Another live record uses the label %q; revoke this one once that one is settled", r.Label))
				}
				return err
			}
		default:
			if _, err := tx.NewUpdate().Model(r).Set("status = ?", StatusRevoking).Set("attempts = 0").
				Set("next_attempt_at = now()").Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
				return err
			}
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "dns.revoked", UserID: audit.Int64(r.UserID),
			TargetType: "dnsRecord", TargetID: fmt.Sprint(id), Details: map[string]any{"fqdn": r.Fqdn}})
	})
	if err != nil {
		return nil, err
	}
	if waiting {
		return s.get(ctx, id, 0)
	}
	return s.drive(ctx, id)
}

// Retry sends a Failed record through provisioning again, or drives a Revoking one now.
func (s *Service) Retry(ctx context.Context, id int64) (*Record, error) {
	r, err := s.get(ctx, id, 0)
	if err != nil {
		return nil, err
	}
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		switch r.Status {
		case StatusFailed:
			if err := s.roomFor(ctx, tx, r.UserID); err != nil {
				return err
			}
			res, err := tx.NewUpdate().Model(r).Set("status = ?", StatusPending).Set("attempts = 0").Set("error_message = ''").
				Set("next_attempt_at = now()").Set("updated_at = now()").WherePK().Where("status = ?", StatusFailed).Exec(ctx)
			if err != nil {
				if db.IsUniqueViolation(err) {
					return httpx.Conflict("The label is in use by another live record")
				}
				return err
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return httpx.Conflict("The record changed meanwhile; reload it")
			}
		case StatusPending, StatusRevoking:
			if _, err := tx.NewUpdate().Model(r).Set("next_attempt_at = now()").WherePK().Exec(ctx); err != nil {
				return err
			}
		default:
			return httpx.Conflict(fmt.Sprintf("Nothing to retry: the record is %s", r.Status))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	wctx, w := withWaiting(ctx, id, false)
	out, err := s.drive(wctx, id)
	if w.taken && out != nil {
		return nil, nameTakenConflict(out.Label, out.Fqdn).WithData(view(out))
	}
	return out, err
}

// AdminFilter narrows the administrators' list.
type AdminFilter struct {
	UserID int64
	Status string
	httpx.PageQuery
}

// AdminList pages through every record.
func (s *Service) AdminList(ctx context.Context, f AdminFilter) (httpx.Page[View], error) {
	var rows []Record
	q := s.db.NewSelect().Model(&rows)
	if f.UserID > 0 {
		q = q.Where("user_id = ?", f.UserID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	return db.ListPage(ctx, q, &rows, f.PageQuery, view)
}
