package dns

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"provisioner/modules/dns/cloudflare"
	"provisioner/platform/audit"
	"provisioner/platform/provision"
)

// LeftoverKind is the finisher's name for the deletion of records our rows left at the provider.
const LeftoverKind provision.Kind = "dns-leftover"

// Statuses of a leftover sweep.
const (
	LeftoverSweeping = "Sweeping"
	LeftoverSwept    = "Swept"
)

// leftover is the stored intent to make sure the provider holds no record of a row that is no
// longer live: a Failed row whose create may have reached the provider (its answer lost), or a
// Failed row a user deletion revoked at once.
type leftover struct {
	bun.BaseModel `bun:"table:dns_leftovers,alias:l"`

	ID            int64     `bun:"id,pk,autoincrement"`
	RecordID      int64     `bun:"record_id,notnull"`
	Status        string    `bun:"status,notnull"`
	Attempts      int       `bun:"attempts,notnull"`
	NextAttemptAt time.Time `bun:"next_attempt_at,notnull"`
	LastError     string    `bun:"last_error,notnull"`
	CreatedAt     time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt     time.Time `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
}

// queueSweeps stores, in tx, a sweep for every row of dns_records matching where (a condition on
// alias r, with args) that has none waiting yet. Callers hold the rows' locks (they have just
// updated them), so two sweeps of one row are not queued at once.
func queueSweeps(ctx context.Context, tx bun.IDB, where string, args ...any) error {
	if _, err := tx.NewRaw("INSERT INTO dns_leftovers (record_id) SELECT r.id FROM dns_records AS r WHERE ("+where+
		") AND NOT EXISTS (SELECT 1 FROM dns_leftovers l WHERE l.record_id = r.id AND l.status = ?)",
		append(args, LeftoverSweeping)...).Exec(ctx); err != nil {
		return fmt.Errorf("queue leftover sweeps: %w", err)
	}
	return nil
}

// Sweeper deletes, in the background, the provider records our rows left behind when they ended
// without deleting them. It deletes only a record named like the row, with its content and
// carrying its comment (Marker), and only while the row is still Failed or Revoked: a row retried
// meanwhile (Pending, Active) owns its record again, and a Revoking one deletes it itself.
type Sweeper struct {
	provider Provider
	audit    *audit.Recorder
}

// Kind implements provision.Provisioner.
func (s *Sweeper) Kind() provision.Kind { return LeftoverKind }

// Table implements provision.Queue.
func (s *Sweeper) Table() string { return "dns_leftovers" }

// InFlight implements provision.Queue. A sweep is never given up: it is retried at the capped
// backoff until the provider answers.
func (s *Sweeper) InFlight() map[string]provision.Verb {
	return map[string]provision.Verb{LeftoverSweeping: provision.VerbDelete}
}

// Create is never called (no status maps to it).
func (s *Sweeper) Create(context.Context, provision.CreateRequest) (provision.CreateResponse, error) {
	return provision.CreateResponse{}, errors.New("a leftover sweep only deletes")
}

// Delete implements provision.Provisioner: it looks the row's name up and deletes the records
// carrying the row's comment, then marks the sweep Swept. It holds the row's lock meanwhile, so
// no retry or revocation of the row runs alongside. A provider failure returns the error: the
// finisher records it and tries again with backoff.
func (s *Sweeper) Delete(ctx context.Context, req provision.DeleteRequest) (provision.DeleteResponse, error) {
	l := new(leftover)
	if err := req.Tx.NewSelect().Model(l).Where("id = ?", req.ResourceID).Scan(ctx); err != nil {
		return provision.DeleteResponse{}, fmt.Errorf("load leftover sweep %d: %w", req.ResourceID, err)
	}
	r := new(Record)
	if err := req.Tx.NewSelect().Model(r).Where("id = ?", l.RecordID).For("UPDATE").Scan(ctx); err != nil {
		return provision.DeleteResponse{}, fmt.Errorf("lock record %d: %w", l.RecordID, err)
	}
	if r.Status == StatusFailed || r.Status == StatusRevoked {
		found, err := s.provider.Lookup(ctx, r.Fqdn)
		if err != nil {
			return provision.DeleteResponse{}, err
		}
		for _, f := range found {
			if findOurs([]cloudflare.Record{f}, r) == nil {
				continue // another party's record, or another row's: never ours to delete
			}
			if err := s.provider.Delete(ctx, f.ID); err != nil {
				return provision.DeleteResponse{}, err
			}
			if err := s.audit.RecordTx(ctx, req.Tx, audit.Event{Action: "dns.leftover.deleted", UserID: audit.Int64(r.UserID),
				TargetType: "dnsRecord", TargetID: fmt.Sprint(r.ID), Details: map[string]any{"fqdn": r.Fqdn, "providerRecordId": f.ID,
					"status": r.Status}}); err != nil {
				return provision.DeleteResponse{}, err
			}
		}
	}
	if _, err := req.Tx.NewUpdate().Model(l).Set("status = ?", LeftoverSwept).Set("last_error = ''").Set("updated_at = now()").
		WherePK().Exec(ctx); err != nil {
		return provision.DeleteResponse{}, fmt.Errorf("record leftover sweep %d: %w", l.ID, err)
	}
	return provision.DeleteResponse{}, nil
}

var (
	_ provision.Provisioner = (*Sweeper)(nil)
	_ provision.Queue       = (*Sweeper)(nil)
)
