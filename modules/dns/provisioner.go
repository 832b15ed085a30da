package dns

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"

	"provisioner/modules/dns/cloudflare"
	"provisioner/platform/audit"
	"provisioner/platform/fault"
	"provisioner/platform/provision"
	"provisioner/platform/ratelimit"
)

// Provider is what the provisioner needs of the DNS provider (cloudflare.Client).
type Provider interface {
	Create(ctx context.Context, r cloudflare.Record) (cloudflare.Record, error)
	Delete(ctx context.Context, id string) error
	Lookup(ctx context.Context, fqdn string) ([]cloudflare.Record, error)
}

// Provisioner creates and deletes records at the provider. It looks the name up before creating,
// so a record made by an attempt whose outcome was lost is adopted, never created twice.
type Provisioner struct {
	provision.Spec
	provider Provider
	audit    *audit.Recorder
	log      *slog.Logger
}

// Marker is the comment every record we create carries: the owner, our row and the row's random
// token, so it is the row's alone even where two deployments share the zone. Only a record
// carrying its row's marker is ever adopted or deleted. A row with MarkerToken "" has the marker
// without a token, which a row with a token never matches.
func Marker(r *Record) string {
	if r.MarkerToken == "" {
		return fmt.Sprintf("provisioner user:%d record:%d", r.UserID, r.ID)
	}
	return fmt.Sprintf("provisioner user:%d record:%d ref:%s", r.UserID, r.ID, r.MarkerToken)
}

// ours reports whether f is r's record as r made it: an A record named like r, with r's content
// and r's marker. The lookup lists every type: a record of another type at the name is never ours.
func ours(f cloudflare.Record, r *Record) bool {
	return f.ID != "" && f.Type == "A" && strings.EqualFold(strings.TrimSuffix(f.Name, "."), r.Fqdn) && f.Content == r.Content && f.Comment == Marker(r)
}

// findOurs returns the provider's record among found that is r's (ours), if any.
func findOurs(found []cloudflare.Record, r *Record) *cloudflare.Record {
	if i := slices.IndexFunc(found, func(f cloudflare.Record) bool { return ours(f, r) }); i >= 0 {
		return &found[i]
	}
	return nil
}

// suspicious is the error of a provider's answer we refuse: transient like a malformed answer, so
// the next attempt looks the name up first and adopts the record carrying the row's marker.
func suspicious(msg string) error {
	return &cloudflare.APIError{Status: http.StatusBadGateway, Errors: []cloudflare.Message{{Message: msg}}}
}

// Create implements provision.Provisioner.
func (p *Provisioner) Create(ctx context.Context, req provision.CreateRequest) (provision.CreateResponse, error) {
	r, err := provision.Load[Record](ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.CreateResponse{}, err
	}
	ctx = ratelimit.WithOwner(ctx, r.UserID)
	found, err := p.provider.Lookup(ctx, r.Fqdn)
	if err != nil {
		return provision.CreateResponse{}, p.failed(ctx, req.Tx, r, err, false)
	}
	if ours := findOurs(found, r); ours != nil {
		return p.active(ctx, req.Tx, r, *ours, true)
	}
	if found, err = p.dropLeftovers(ctx, req.Tx, r, found); err != nil {
		return provision.CreateResponse{}, p.failed(ctx, req.Tx, r, err, false)
	}
	if len(found) > 0 {
		return provision.CreateResponse{}, p.nameTaken(ctx, req, r, taken(r))
	}
	created, err := p.provider.Create(ctx, cloudflare.Record{Name: r.Name, Content: r.Content, TTL: sentTTL(r.RecordTTL, r.Proxied), Proxied: r.Proxied,
		Comment: Marker(r)})
	var ae *cloudflare.APIError
	if errors.As(err, &ae) && (ae.Has(cloudflare.CodeIdenticalRecord) || ae.Has(cloudflare.CodeRecordExists) || ae.Has(cloudflare.CodeNameExists)) {
		// Made meanwhile, often by an earlier try whose answer was lost: adopted if ours. Until a
		// lookup says whose it is the row stays Pending (retried), never Failed.
		again, lerr := p.provider.Lookup(ctx, r.Fqdn)
		if lerr != nil {
			return provision.CreateResponse{}, fmt.Errorf("the provider reports %s as existing (%s); looking it up failed: %w", r.Fqdn, ae.Error(), lerr)
		}
		if ours := findOurs(again, r); ours != nil {
			return p.active(ctx, req.Tx, r, *ours, true)
		}
		if len(again) == 0 {
			return provision.CreateResponse{}, fmt.Errorf("the provider reports %s as existing (%s) but lists no such record", r.Fqdn, ae.Error())
		}
		return provision.CreateResponse{}, p.nameTaken(ctx, req, r, ae.Error()+"; "+taken(r))
	}
	if err != nil {
		// The create was sent: whatever it answered, it may have reached the provider.
		return provision.CreateResponse{}, p.failed(ctx, req.Tx, r, err, true)
	}
	if what := notAsAsked(created, r); what != "" {
		// An answer about another record: stored, its id would have revoking r delete that one.
		return provision.CreateResponse{}, suspicious(msgOtherRecord + what + "; refused")
	}
	return p.active(ctx, req.Tx, r, created, false)
}

// msgOtherRecord begins the error of a create answered with a record unlike the one asked for.
const msgOtherRecord = "suspicious result from the provider: a created record "

// notAsAsked says how the record a create was answered with differs from r's (its name, type or
// content, as far as the answer gives them), or "" when it does not.
func notAsAsked(created cloudflare.Record, r *Record) string {
	switch {
	case created.Name != "" && !strings.EqualFold(strings.TrimSuffix(created.Name, "."), r.Fqdn):
		return "of another name"
	case created.Type != "" && created.Type != "A":
		return "of another type"
	case created.Content != "" && created.Content != r.Content:
		return "with another content"
	}
	return ""
}

var markerRe = regexp.MustCompile(`^provisioner user:(\d+) record:(\d+)(?: ref:[0-9a-f]{32})?$`)

// dropLeftovers deletes, among the records named like r, those of our rows no longer live (Failed or
// Revoked with a lost create) carrying such a row's marker and content (ours); one with another
// content was changed by someone else and holds the name. It returns what remains.
func (p *Provisioner) dropLeftovers(ctx context.Context, tx bun.IDB, r *Record, found []cloudflare.Record) ([]cloudflare.Record, error) {
	var rest []cloudflare.Record
	for _, f := range found {
		m := markerRe.FindStringSubmatch(f.Comment)
		if m == nil || !strings.EqualFold(strings.TrimSuffix(f.Name, "."), r.Fqdn) {
			rest = append(rest, f)
			continue
		}
		userID, uerr := strconv.ParseInt(m[1], 10, 64)
		id, ierr := strconv.ParseInt(m[2], 10, 64)
		if uerr != nil || ierr != nil { // out of range: no row of ours
			rest = append(rest, f)
			continue
		}
		dead := new(Record)
		err := tx.NewSelect().Model(dead).Where("id = ?", id).Where("user_id = ?", userID).
			Where("id <> ?", r.ID).Where("fqdn = ?", r.Fqdn).Where("status IN (?)", bun.In([]string{spec.Failed, spec.Gone})).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			rest = append(rest, f)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("look up the row of %q: %w", f.Comment, err)
		}
		if !ours(f, dead) {
			rest = append(rest, f) // our marker, another content: not the dead row's record as it made it
			continue
		}
		if another, err := spec.HeldByAnother(ctx, tx, "provider_record_id", f.ID, dead.ID); err != nil {
			return nil, err
		} else if another { // another row's record: never deleted as a leftover
			rest = append(rest, f)
			continue
		}
		if err := p.provider.Delete(ctx, f.ID); err != nil {
			return nil, err
		}
		if err := p.audit.RecordTx(ctx, tx, spec.Event("dns.leftover.deleted", dead.UserID, dead.ID,
			map[string]any{"fqdn": r.Fqdn, "providerRecordId": f.ID, "for": r.ID})); err != nil {
			return nil, err
		}
	}
	return rest, nil
}

// sentTTL is the TTL sent: 1 (automatic) for a proxied record, whose TTL the provider manages.
func sentTTL(ttl int, proxied bool) int {
	if proxied {
		return 1
	}
	return ttl
}

// heldTTL is the TTL the provider answered for r's record, or what was sent when it gave none.
func heldTTL(r *Record, held cloudflare.Record) int {
	if held.TTL > 0 {
		return held.TTL
	}
	return sentTTL(r.RecordTTL, r.Proxied)
}

func taken(r *Record) string {
	return fmt.Sprintf("the name %s already exists at the provider and was not created for this record", r.Fqdn)
}

// nameTaken ends a create whose name the provider holds for another record: Failed with msg. A
// request waiting for it gets a conflict (provision.Refused); when it stored r itself, r is
// deleted in the driving transaction, so the client's 409 leaves nothing behind.
func (p *Provisioner) nameTaken(ctx context.Context, req provision.CreateRequest, r *Record, msg string) error {
	if !req.Waiting {
		return p.final(ctx, req.Tx, r, msg, false)
	}
	refused := &provision.Refused{Err: fault.Conflict(fmt.Sprintf("The label %q is already in use: the DNS provider holds %s for a record "+
		"not made for this one (another party's)", r.Label, r.Fqdn))}
	if !req.Fresh {
		if err := p.final(ctx, req.Tx, r, msg, false); err != nil {
			return err
		}
		return refused
	}
	if _, err := req.Tx.NewDelete().Model(r).WherePK().Where("status = ?", spec.Creating).Exec(ctx); err != nil {
		return fmt.Errorf("drop record %d whose name is taken: %w", r.ID, err)
	}
	return refused
}

// msgDuplicateID is the error of a provider's answer naming a record another row holds.
const msgDuplicateID = "suspicious result from the provider: a record id that belongs to another record; refused"

// active records the provider's record as r's: its id and the TTL it holds (what the zone serves).
func (p *Provisioner) active(ctx context.Context, tx bun.IDB, r *Record, held cloudflare.Record, adopted bool) (provision.CreateResponse, error) {
	providerID := held.ID
	if providerID == "" { // never Active without the provider's id (a revocation could not find it)
		return provision.CreateResponse{}, fmt.Errorf("record %d: the provider gave no record id", r.ID)
	}
	if another, err := spec.HeldByAnother(ctx, tx, "provider_record_id", providerID, r.ID); err != nil {
		return provision.CreateResponse{}, err
	} else if another { // stored, revoking r would delete another row's record
		return provision.CreateResponse{}, suspicious(msgDuplicateID)
	}
	ttl := heldTTL(r, held)
	if _, err := provision.Succeed(tx.NewUpdate().Model(r), spec.Active).Set("provider_record_id = ?", providerID).
		Set("record_ttl = ?", ttl).WherePK().Exec(ctx); err != nil {
		return provision.CreateResponse{}, fmt.Errorf("record %d active: %w", r.ID, err)
	}
	if err := p.audit.RecordTx(ctx, tx, spec.Event("dns.created", r.UserID, r.ID,
		map[string]any{"fqdn": r.Fqdn, "content": r.Content, "providerRecordId": providerID, "adopted": adopted})); err != nil {
		return provision.CreateResponse{}, err
	}
	return provision.CreateResponse{ExternalID: providerID}, nil
}

// final records a failure no retry can fix (a 4xx): Failed with the provider's message. When a
// create may have reached the provider (an earlier attempt, or this one: sent), a sweep is queued
// to delete the record carrying r's marker and content, if the provider holds one.
func (p *Provisioner) final(ctx context.Context, tx bun.IDB, r *Record, msg string, sent bool) error {
	if _, err := provision.Fail(tx.NewUpdate().Model(r), spec.Failed, msg).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("record %d failed: %w", r.ID, err)
	}
	if r.Attempts > 0 || sent {
		if err := sweeps.Queue(ctx, tx, "r.id = ?", r.ID); err != nil {
			return err
		}
	}
	return p.audit.RecordTx(ctx, tx, spec.Event("dns.failed", r.UserID, r.ID, map[string]any{"fqdn": r.Fqdn, "error": msg}))
}

// MsgInternal is the errorMessage of a failed attempt whose error is not the provider's (our
// database's, an audit write's, our budget's Redis): their text is only logged.
const MsgInternal = "internal error while handling the provider's answer (details in the server log)"

// failed is final for a 4xx (sent: it answers a create that was sent), a retry otherwise.
func (p *Provisioner) failed(ctx context.Context, tx bun.IDB, r *Record, err error, sent bool) error {
	if cloudflare.Transient(err) {
		return err
	}
	return p.final(ctx, tx, r, err.Error(), sent)
}

// lookupOurs looks r's name up and returns the ids of r's records (ours) no other live row holds.
func lookupOurs(ctx context.Context, provider Provider, tx bun.IDB, r *Record) ([]string, error) {
	found, err := provider.Lookup(ctx, r.Fqdn)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, f := range found {
		if !ours(f, r) {
			continue
		}
		if another, err := spec.HeldByAnother(ctx, tx, "provider_record_id", f.ID, r.ID); err != nil {
			return nil, err
		} else if !another {
			ids = append(ids, f.ID)
		}
	}
	return ids, nil
}

// Delete implements provision.Provisioner: the provider's record (by id, or by lookup when the
// create's outcome was never recorded) is deleted, then the row is Revoked. An id another live row
// holds (possible where dns_records_provider_id_uq's migration found duplicates and skipped it) is
// left at the provider, logged, and the name is looked up instead (lookupOurs).
func (p *Provisioner) Delete(ctx context.Context, req provision.DeleteRequest) (provision.DeleteResponse, error) {
	r, err := provision.Load[Record](ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.DeleteResponse{}, err
	}
	ctx = ratelimit.WithOwner(ctx, r.UserID)
	var ids []string
	if id := r.ProviderRecordID; id != "" {
		if another, err := spec.HeldByAnother(ctx, req.Tx, "provider_record_id", id, r.ID); err != nil {
			return provision.DeleteResponse{}, err
		} else if another {
			p.log.Warn("dns revocation: the record's provider id is held by another live record; left at the provider",
				"record", r.ID, "fqdn", r.Fqdn, "providerRecordId", id)
		} else {
			ids = []string{id}
		}
	}
	if ids == nil {
		if ids, err = lookupOurs(ctx, p.provider, req.Tx, r); err != nil {
			return provision.DeleteResponse{}, err
		}
	}
	for _, id := range ids {
		if err := p.provider.Delete(ctx, id); err != nil {
			if _, uerr := provision.Note(req.Tx.NewUpdate().Model(r), spec.ErrorText(err)).WherePK().Exec(ctx); uerr != nil {
				return provision.DeleteResponse{}, uerr
			}
			return provision.DeleteResponse{}, err
		}
	}
	if r.ProviderRecordID == "" {
		// A create that timed out on our side may still be carried out after this lookup.
		if err := sweeps.QueueAfter(ctx, req.Tx, r.ID, LateCreateSweepAfter); err != nil {
			return provision.DeleteResponse{}, err
		}
	}
	if _, err := provision.Succeed(req.Tx.NewUpdate().Model(r), spec.Gone).WherePK().Exec(ctx); err != nil {
		return provision.DeleteResponse{}, fmt.Errorf("record %d revoked: %w", r.ID, err)
	}
	return provision.DeleteResponse{}, nil
}

// GiveUp marks a record whose attempts ran out Failed and queues a sweep: an attempt without an
// answer may have created it, and a Failed record must not resolve. Revocations are never given up.
func (p *Provisioner) GiveUp(ctx context.Context, tx bun.IDB, id int64, lastErr error) error {
	if ended, err := p.GaveUp(ctx, tx, id, lastErr); err != nil || !ended {
		return err
	}
	return sweeps.Queue(ctx, tx, "r.id = ?", id)
}

// ReleaseUser sets a deleted user's live and Failed records Revoking; a Failed one whose label
// another live record holds is Revoked at once, a sweep queued. Each is audited dns.revoked.
func (p *Provisioner) ReleaseUser(ctx context.Context, tx bun.IDB, userID int64) error {
	var revoking, revoked []releasedRecord
	if err := provision.Restart(tx.NewUpdate().Model((*Record)(nil)), spec.Deleting, time.Time{}).Where("user_id = ?", userID).
		WhereGroup(" AND ", func(q *bun.UpdateQuery) *bun.UpdateQuery {
			return q.Where("status IN (?)", bun.In([]string{spec.Creating, spec.Active})).
				WhereOr("status = ? AND NOT EXISTS (SELECT 1 FROM dns_records o WHERE o.label = r.label AND o.id <> r.id AND o.status IN (?))",
					spec.Failed, bun.In(p.Live()))
		}).Returning("id, fqdn").Scan(ctx, &revoking); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("release records of user %d: %w", userID, err)
	}
	if err := sweeps.Queue(ctx, tx, "r.user_id = ? AND r.status = ?", userID, spec.Failed); err != nil {
		return err
	}
	if err := provision.Move(tx.NewUpdate().Model((*Record)(nil)), spec.Gone).Where("user_id = ?", userID).Where("status = ?", spec.Failed).Returning("id, fqdn").Scan(ctx, &revoked); err != nil &&
		!errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("revoke failed records of user %d: %w", userID, err)
	}
	for _, r := range append(revoking, revoked...) {
		if err := p.audit.RecordTx(ctx, tx, spec.Event("dns.revoked", userID, r.ID, map[string]any{"fqdn": r.Fqdn, "reason": "user.deleted"})); err != nil {
			return err
		}
	}
	return nil
}

// releasedRecord is a record ReleaseUser revoked, for its audit event.
type releasedRecord struct {
	ID   int64  `bun:"id"`
	Fqdn string `bun:"fqdn"`
}

var _ provision.RetryAfterer = (*cloudflare.APIError)(nil)
