package dns

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/fault"
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
// then stands (nil when the provider holds the name for another party: the row is dropped) and
// the outcome.
func (s *Service) Create(ctx context.Context, in CreateInput) (*Record, provision.Outcome, error) {
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
	switch {
	case err != nil:
		return nil, provision.Outcome{}, err
	case s.cfg.reserved(label):
		return nil, provision.Outcome{}, fault.Conflict(fmt.Sprintf("The name %q is reserved", label))
	case !s.cfg.Enabled():
		return nil, provision.Outcome{}, fault.Unavailable("The DNS cell is not configured (Dns:ZoneId, Dns:ApiToken)")
	}
	ttl = sentTTL(ttl, proxied) // stored as the provider will hold it
	name, fqdn := s.names(label)
	rec := &Record{Label: label, Name: name, Fqdn: fqdn, Content: content, RecordTTL: ttl,
		Proxied: proxied, State: spec.Intent(in.UserID)}
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := s.roomFor(ctx, tx, in.UserID); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(rec).Returning("*").Exec(ctx); err != nil {
			if db.IsUniqueViolation(err) {
				return fault.Conflict(fmt.Sprintf("The label %q is already in use in this cell", label))
			}
			return fmt.Errorf("store record intent: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	return provision.Run[Record](ctx, s.finisher, s.db, spec, rec.ID, provision.Stored)
}

// roomFor checks Dns:MaxRecordsPerUser for one more live record of userID (provision.Spec.RoomFor).
func (s *Service) roomFor(ctx context.Context, tx bun.Tx, userID int64) error {
	return spec.RoomFor(ctx, tx, (*Record)(nil), userID, s.cfg.MaxRecordsPerUser,
		fmt.Sprintf("Quota reached: at most %d DNS records per user", s.cfg.MaxRecordsPerUser))
}

// msgNotFound is the 404 of a record.
const msgNotFound = "DNS record not found"

// List returns the user's records, newest last: all but the Revoked ones. A revoked record is
// gone for its user (the administrators' list keeps the trace); so the list is bounded by the
// quota plus the Failed records, each of which the user can revoke.
func (s *Service) List(ctx context.Context, userID int64) ([]View, error) {
	return provision.List(ctx, s.db, userID, []string{StatusRevoked}, view)
}

// Revoke deletes a record at the provider: Active/Pending/Failed → Revoking → Revoked. A Failed
// record goes through the provider too: its create may have reached the provider (an answer lost,
// then attempts run out), so the name is looked up and a record carrying this row's marker is
// deleted. It returns the record as it then stands and the outcome (Pending: it stays Revoking for
// the finisher). A record already Revoking is driven again only once its next attempt is due:
// before that the provider is not called (its Retry-After, our backoff).
func (s *Service) Revoke(ctx context.Context, id, userID int64) (*Record, provision.Outcome, error) {
	how := provision.Again
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		r, err := provision.Lock[Record](ctx, tx, id, userID, msgNotFound)
		if err != nil {
			return err
		}
		switch r.Status {
		case StatusRevoked:
			return fault.Conflict("The record is already revoked")
		case StatusRevoking:
			// Already being revoked. While its next attempt is not due (the finisher's backoff,
			// or the provider's Retry-After), asking again does not call the provider: the answer
			// is the record as it stands (502, Retry-After: the remaining wait).
			if r.NextAttemptAt.After(time.Now()) {
				how = provision.ReadOnly
			}
			return nil
		case StatusFailed:
			// A Failed record does not hold its label; another live record may have taken it. Then
			// this one cannot be Revoking (one live row per label): it is Revoked at once, and a sweep
			// deletes at the provider whatever record of its own its create may have left (only a
			// record carrying its marker, never the other one's), as for a deleted user's.
			taken, err := tx.NewSelect().Model((*Record)(nil)).Where("label = ?", r.Label).Where("id <> ?", r.ID).
				Where("status IN (?)", bun.In(spec.Live())).Exists(ctx)
			if err != nil {
				return fmt.Errorf("find the live record of label %q: %w", r.Label, err)
			}
			if taken {
				if err := queueSweeps(ctx, tx, "r.id = ?", r.ID); err != nil {
					return err
				}
				if _, err := provision.Move(tx.NewUpdate().Model(r), StatusRevoked).WherePK().Exec(ctx); err != nil {
					return err
				}
				break
			}
			fallthrough
		default:
			if _, err := provision.Restart(tx.NewUpdate().Model(r), StatusRevoking, time.Time{}).WherePK().Exec(ctx); err != nil {
				if db.IsUniqueViolation(err) {
					return fault.Conflict(fmt.Sprintf("Another live record uses the label %q; revoke this one once that one is settled", r.Label))
				}
				return err
			}
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "dns.revoked", UserID: audit.Int64(r.UserID),
			TargetType: "dnsRecord", TargetID: fmt.Sprint(id), Details: map[string]any{"fqdn": r.Fqdn}})
	})
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	return provision.Run[Record](ctx, s.finisher, s.db, spec, id, how)
}

// Retry sends a Failed record through provisioning again, or drives a Revoking one now.
func (s *Service) Retry(ctx context.Context, id int64) (*Record, provision.Outcome, error) {
	r, err := provision.Find[Record](ctx, s.db, id, msgNotFound)
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		err := spec.Retry(ctx, tx, r, r.Status, "record", func() error { return s.roomFor(ctx, tx, r.UserID) })
		if db.IsUniqueViolation(err) {
			return fault.Conflict("The label is in use by another live record")
		}
		return err
	})
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	return provision.Run[Record](ctx, s.finisher, s.db, spec, id, provision.Again)
}
