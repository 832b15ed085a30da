package dns

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/provision"
	"provisioner/platform/ratelimit"
)

// LeftoverKind is the finisher's name for the deletion of records our rows left at the provider.
const LeftoverKind provision.Kind = "dns-leftover"

// Statuses of a leftover sweep: Sweeping until the provider answered (Swept: whatever of ours it
// held is deleted, or it held nothing) or the sweep was given up (GaveUp, with its last error).
const (
	LeftoverSweeping = "Sweeping"
	LeftoverSwept    = "Swept"
	LeftoverGaveUp   = "GaveUp"
)

// Bounds of a sweep. They are this module's policy, not the finisher's (whose Finisher:* keys are
// the same for every kind), hence constants.
const (
	// SweepGiveUpAfter: a sweep whose attempts keep failing is given up (GaveUp, logged at WARN
	// once and audited dns.leftover.given_up) at its first failed attempt once it is this old
	// and has failed at least Finisher:MaxAttempts times. The finisher retries it meanwhile at
	// its capped backoff (5 min), or later when the provider asks so with Retry-After.
	SweepGiveUpAfter = 7 * 24 * time.Hour
	// SweepRetention: Swept and GaveUp sweeps are deleted this long after they ended (by the
	// finisher's prune, a small batch at a time).
	SweepRetention = 30 * 24 * time.Hour
)

// leftover is the stored intent to make sure the provider holds no record of a row that is no
// longer live: a Failed row whose create may have reached the provider (its answer lost), or a
// Failed row a user deletion revoked at once.
type leftover struct {
	bun.BaseModel `bun:"table:dns_leftovers,alias:l"`

	ID       int64  `bun:"id,pk,autoincrement"`
	RecordID int64  `bun:"record_id,notnull"`
	Status   string `bun:"status,notnull"`
	provision.Retries
	CreatedAt time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt time.Time `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
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

// LateCreateSweepAfter is how long after the revocation of a record whose create's outcome was
// never recorded (revoked while Pending, found absent by the lookup) its cleanup runs: a create
// that timed out on our side may still be carried out by a slow provider after that lookup.
const LateCreateSweepAfter = 5 * time.Minute

// queueLateSweep stores, in tx, a sweep of record id due after wait, unless one is waiting already.
// The caller holds the record's lock.
func queueLateSweep(ctx context.Context, tx bun.IDB, id int64, wait time.Duration) error {
	if _, err := tx.NewRaw("INSERT INTO dns_leftovers (record_id, next_attempt_at) SELECT ?, now() + ? * interval '1 second' "+
		"WHERE NOT EXISTS (SELECT 1 FROM dns_leftovers l WHERE l.record_id = ? AND l.status = ?)",
		id, int64(wait/time.Second), id, LeftoverSweeping).Exec(ctx); err != nil {
		return fmt.Errorf("queue the late sweep of record %d: %w", id, err)
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
	log      *slog.Logger
}

// Kind implements provision.Provisioner.
func (s *Sweeper) Kind() provision.Kind { return LeftoverKind }

// Table implements provision.Queue.
func (s *Sweeper) Table() string { return "dns_leftovers" }

// InFlight implements provision.Queue. A failed sweep is retried with the finisher's backoff
// until the provider answers, or until it is given up (GiveUp, SweepGiveUpAfter).
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
	ctx = ratelimit.WithOwner(ctx, r.UserID)
	if r.Status == spec.Failed || r.Status == spec.Gone {
		ids, err := lookupOurs(ctx, s.provider, req.Tx, r)
		if err != nil {
			return provision.DeleteResponse{}, err
		}
		for _, id := range ids {
			if err := s.provider.Delete(ctx, id); err != nil {
				return provision.DeleteResponse{}, err
			}
			if err := s.audit.RecordTx(ctx, req.Tx, audit.Event{Action: "dns.leftover.deleted", UserID: audit.Int64(r.UserID),
				TargetType: "dnsRecord", TargetID: fmt.Sprint(r.ID), Details: map[string]any{"fqdn": r.Fqdn, "providerRecordId": id,
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

// ErrorText implements provision.ErrorTexter: a sweep's last_error is shown to administrators.
func (s *Sweeper) ErrorText(err error) string { return shownError(err) }

// GiveUp implements provision.GiveUpper; the finisher calls it, in the attempt's transaction,
// after every failed attempt once Finisher:MaxAttempts have failed. It gives the sweep up (GaveUp,
// keeping the last error the finisher has just recorded) only once the sweep is SweepGiveUpAfter
// old; a younger one stays Sweeping and is retried. Giving up is logged at WARN and audited once
// (the row is no longer in flight afterwards): whatever our row left at the provider stays there
// and has to be removed by hand.
func (s *Sweeper) GiveUp(ctx context.Context, tx bun.IDB, id int64, lastErr error) error {
	var (
		recordID int64
		attempts int
	)
	err := tx.NewRaw("UPDATE dns_leftovers SET status = ?, updated_at = now() WHERE id = ? AND status = ? AND created_at <= now() - ? * interval '1 second' "+
		"RETURNING record_id, attempts", LeftoverGaveUp, id, LeftoverSweeping, int64(SweepGiveUpAfter/time.Second)).Scan(ctx, &recordID, &attempts)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // not old enough yet (or no longer Sweeping): retried
	}
	if err != nil {
		return fmt.Errorf("give up leftover sweep %d: %w", id, err)
	}
	r := new(Record)
	if err := tx.NewSelect().Model(r).Column("id", "user_id", "fqdn", "marker_token").Where("id = ?", recordID).Scan(ctx); err != nil {
		return fmt.Errorf("load record %d: %w", recordID, err)
	}
	msg := shownError(lastErr) // as the finisher stores last_error
	s.log.Warn("dns leftover sweep given up: a record of ours may stay at the provider", "sweep", id, "record", r.ID,
		"fqdn", r.Fqdn, "comment", Marker(r), "attempts", attempts, "error", provision.StoredError(lastErr))
	return s.audit.RecordTx(ctx, tx, audit.Event{Action: "dns.leftover.given_up", UserID: audit.Int64(r.UserID), TargetType: "dnsRecord",
		TargetID: fmt.Sprint(r.ID), Details: map[string]any{"fqdn": r.Fqdn, "comment": Marker(r), "attempts": attempts, "error": msg}})
}

// Prune implements provision.Pruner: it deletes up to limit sweeps that ended (Swept or GaveUp)
// more than SweepRetention ago, oldest first, skipping rows another replica is deleting.
func (s *Sweeper) Prune(ctx context.Context, db bun.IDB, limit int) (int, error) {
	res, err := db.NewRaw("DELETE FROM dns_leftovers WHERE id IN (SELECT id FROM dns_leftovers WHERE status IN (?) "+
		"AND updated_at < now() - ? * interval '1 second' ORDER BY updated_at LIMIT ? FOR UPDATE SKIP LOCKED)",
		bun.In([]string{LeftoverSwept, LeftoverGaveUp}), int64(SweepRetention/time.Second), limit).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune leftover sweeps: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

var (
	_ provision.Provisioner = (*Sweeper)(nil)
	_ provision.Queue       = (*Sweeper)(nil)
	_ provision.GiveUpper   = (*Sweeper)(nil)
	_ provision.Pruner      = (*Sweeper)(nil)
)
