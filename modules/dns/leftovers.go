package dns

import (
	"context"
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

// sweeps is the stored intent to make sure the provider holds no record of a row that is no
// longer live: a Failed row whose create may have reached the provider (its answer lost), or a
// Failed row a user deletion revoked at once (provision.SweepQueue).
var sweeps = provision.SweepQueue{Sweeps: "dns_leftovers", Rows: "dns_records", Ref: "record_id"}

// LateCreateSweepAfter is how long after the revocation of a record whose create's outcome was
// never recorded (revoked while Pending, found absent by the lookup) its cleanup runs: a create
// that timed out on our side may still be carried out by a slow provider after that lookup.
const LateCreateSweepAfter = 5 * time.Minute

// newSweeper deletes, in the background, the provider records our rows left behind when they ended
// without deleting them. It deletes only a record named like the row, with its content and
// carrying its comment (Marker), and only while the row is still Failed or Revoked: a row retried
// meanwhile (Pending, Active) owns its record again, and a Revoking one deletes it itself.
func newSweeper(provider Provider, rec *audit.Recorder, log *slog.Logger) *provision.Sweeper {
	return &provision.Sweeper{SweepQueue: sweeps, Name: LeftoverKind, GiveUpAfter: SweepGiveUpAfter, Retention: SweepRetention,
		Sweep: func(ctx context.Context, tx bun.IDB, id int64) error { return sweep(ctx, provider, rec, tx, id) },
		GaveUp: func(ctx context.Context, tx bun.IDB, sweepID, id int64, attempts int, lastErr error) error {
			return gaveUp(ctx, rec, log, tx, sweepID, id, attempts, lastErr)
		},
		Text: shownError}
}

// sweep looks record id's name up and deletes the records carrying its comment. It holds the
// row's lock meanwhile, so no retry or revocation of the row runs alongside. A provider failure
// returns the error: the finisher records it and tries again with backoff.
func sweep(ctx context.Context, provider Provider, rec *audit.Recorder, tx bun.IDB, id int64) error {
	r := new(Record)
	if err := tx.NewSelect().Model(r).Where("id = ?", id).For("UPDATE").Scan(ctx); err != nil {
		return fmt.Errorf("lock record %d: %w", id, err)
	}
	ctx = ratelimit.WithOwner(ctx, r.UserID)
	if r.Status != spec.Failed && r.Status != spec.Gone {
		return nil
	}
	ids, err := lookupOurs(ctx, provider, tx, r)
	if err != nil {
		return err
	}
	for _, pid := range ids {
		if err := provider.Delete(ctx, pid); err != nil {
			return err
		}
		if err := rec.RecordTx(ctx, tx, audit.Event{Action: "dns.leftover.deleted", UserID: audit.Int64(r.UserID),
			TargetType: "dnsRecord", TargetID: fmt.Sprint(r.ID), Details: map[string]any{"fqdn": r.Fqdn, "providerRecordId": pid,
				"status": r.Status}}); err != nil {
			return err
		}
	}
	return nil
}

// gaveUp logs at WARN and audits (dns.leftover.given_up) sweep sweepID of record id given up:
// whatever the row left at the provider stays there and has to be removed by hand.
func gaveUp(ctx context.Context, rec *audit.Recorder, log *slog.Logger, tx bun.IDB, sweepID, id int64, attempts int, lastErr error) error {
	r := new(Record)
	if err := tx.NewSelect().Model(r).Column("id", "user_id", "fqdn", "marker_token").Where("id = ?", id).Scan(ctx); err != nil {
		return fmt.Errorf("load record %d: %w", id, err)
	}
	msg := shownError(lastErr) // as the finisher stores last_error
	log.Warn("dns leftover sweep given up: a record of ours may stay at the provider", "sweep", sweepID, "record", r.ID,
		"fqdn", r.Fqdn, "comment", Marker(r), "attempts", attempts, "error", provision.StoredError(lastErr))
	return rec.RecordTx(ctx, tx, audit.Event{Action: "dns.leftover.given_up", UserID: audit.Int64(r.UserID), TargetType: "dnsRecord",
		TargetID: fmt.Sprint(r.ID), Details: map[string]any{"fqdn": r.Fqdn, "comment": Marker(r), "attempts": attempts, "error": msg}})
}
