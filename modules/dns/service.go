package dns

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"provisioner/modules/dns/cloudflare"
	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/provision"
)

// Kind is the provisioner kind of DNS records.
const Kind provision.Kind = "dns"

// spec is the records' lifecycle: Pending → Active or Failed; Revoking → Revoked.
var spec = provision.Spec{Name: Kind, Rows: "dns_records", Creating: "Pending", Active: "Active", Failed: "Failed",
	Deleting: "Revoking", Gone: "Revoked", Target: "dnsRecord", Texts: provision.Texts{Internal: MsgInternal, Provider: []func(error) bool{
		provision.IsA[*cloudflare.APIError], provision.IsA[*cloudflare.TransportError], provision.IsA[*provision.Deferred]}}}

// Service manages the DNS cell's records: intent stored, provider called, outcome recorded.
type Service struct {
	db       *bun.DB
	cfg      Config
	audit    *audit.Recorder
	finisher *provision.Finisher
}

// CreateInput is a request for userID's record; nil fields take the configured defaults.
type CreateInput struct {
	RecordBody
	UserID int64
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

// Create validates, stores the Pending intent and drives it once: the record as it then stands
// (nil when the provider holds the name for another party: the row is dropped) and the outcome.
func (s *Service) Create(ctx context.Context, in CreateInput) (*Record, provision.Outcome, error) {
	content := strings.TrimSpace(orDefault(in.Content, s.cfg.DefaultContent))
	ttl, proxied := orDefault(in.RecordTTL, s.cfg.RecordTtl), orDefault(in.Proxied, s.cfg.Proxied)
	label, err := validate(in.Label, content, in.Content != nil && s.cfg.DefaultContent != "", ttl, s.cfg.AllowPrivateContent)
	switch {
	case err != nil:
		return nil, provision.Outcome{}, err
	case s.cfg.reserved(label):
		return nil, provision.Outcome{}, fault.Conflict(fmt.Sprintf("The name %q is reserved", label))
	case !s.cfg.Enabled():
		return nil, provision.Outcome{}, fault.Unavailable("The DNS cell is not configured (Dns:ZoneId, Dns:ApiToken)")
	}
	name, fqdn := s.names(label)
	rec := &Record{Label: label, Name: name, Fqdn: fqdn, Content: content, RecordTTL: sentTTL(ttl, proxied),
		Proxied: proxied, State: spec.Intent(in.UserID)}
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := s.roomFor(ctx, tx, in.UserID); err != nil {
			return err
		}
		if _, err := tx.NewInsert().Model(rec).Returning("*").Exec(ctx); db.IsUniqueViolation(err) {
			return fault.Conflict(fmt.Sprintf("The label %q is already in use in this cell", label))
		} else if err != nil {
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

// List returns the user's records but the Revoked ones, oldest first.
func (s *Service) List(ctx context.Context, userID int64) ([]View, error) {
	return provision.List(ctx, s.db, userID, []string{spec.Gone}, view)
}

// Revoke deletes a record at the provider: Active, Pending or Failed (its create may have reached
// the provider) → Revoking → Revoked. A record already Revoking is driven again only once its next
// attempt is due. It returns the record as it then stands and the outcome.
func (s *Service) Revoke(ctx context.Context, id, userID int64) (*Record, provision.Outcome, error) {
	return provision.DeleteNow[Record](ctx, s.finisher, s.db, spec, id, userID, provision.Deleting[Record]{NotFound: msgNotFound,
		Gone: "The record is already revoked", Start: s.startRevoke,
		Audit: func(ctx context.Context, tx bun.Tx, r *Record) error {
			return s.audit.RecordTx(ctx, tx, spec.Event("dns.revoked", r.UserID, r.ID, map[string]any{"fqdn": r.Fqdn}))
		}})
}

// startRevoke sets r (live or Failed, locked in tx) Revoking. A Failed record whose label another
// live record took is Revoked at once, a sweep queued for what its create may have left.
func (s *Service) startRevoke(ctx context.Context, tx bun.Tx, r *Record) error {
	if r.Status == spec.Failed {
		taken, err := tx.NewSelect().Model((*Record)(nil)).Where("label = ?", r.Label).Where("id <> ?", r.ID).
			Where("status IN (?)", bun.In(spec.Live())).Exists(ctx)
		if err != nil {
			return fmt.Errorf("find the live record of label %q: %w", r.Label, err)
		}
		if taken {
			if err := sweeps.Queue(ctx, tx, "r.id = ?", r.ID); err != nil {
				return err
			}
			_, err := provision.Move(tx.NewUpdate().Model(r), spec.Gone).WherePK().Exec(ctx)
			return err
		}
	}
	_, err := provision.Restart(tx.NewUpdate().Model(r), spec.Deleting, time.Time{}).WherePK().Exec(ctx)
	if db.IsUniqueViolation(err) {
		return fault.Conflict(fmt.Sprintf("Another live record uses the label %q; revoke this one once that one is settled", r.Label))
	}
	return err
}

// Retry sends a Failed record through provisioning again, or drives a Revoking one now.
func (s *Service) Retry(ctx context.Context, id int64) (*Record, provision.Outcome, error) {
	return provision.RetryNow[Record](ctx, s.finisher, s.db, spec, id, provision.Retrying{What: "record", NotFound: msgNotFound,
		Taken: "The label is in use by another live record", Room: s.roomFor})
}
