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

// Bounds of a sweep, this module's policy (the Finisher:* keys are every kind's).
const (
	// SweepGiveUpAfter: a sweep this old whose attempts keep failing (Finisher:MaxAttempts at
	// least) is given up at its next failure, logged at WARN and audited dns.leftover.given_up.
	SweepGiveUpAfter = 7 * 24 * time.Hour
	// SweepRetention: ended sweeps are pruned this long after they ended.
	SweepRetention = 30 * 24 * time.Hour
)

// sweeps is the stored intent to make sure the provider holds no record of a row no longer live
// whose create may have reached it (provision.SweepQueue).
var sweeps = provision.SweepQueue{Sweeps: "dns_leftovers", Rows: "dns_records", Ref: "record_id"}

// LateCreateSweepAfter is how long after revoking a record whose create's outcome was never
// recorded its sweep runs: a slow provider may still carry that create out.
const LateCreateSweepAfter = 5 * time.Minute

// newSweeper deletes in the background the records our rows left at the provider: only one that
// is the row's (ours), and only while the row is still Failed or Revoked (a row retried meanwhile
// owns its record again; a Revoking one deletes it itself).
func newSweeper(provider Provider, rec *audit.Recorder, log *slog.Logger) *provision.Sweeper {
	return &provision.Sweeper{SweepQueue: sweeps, Name: LeftoverKind, GiveUpAfter: SweepGiveUpAfter, Retention: SweepRetention,
		Sweep: func(ctx context.Context, tx bun.IDB, id int64) error { return sweep(ctx, provider, rec, tx, id) },
		GaveUp: func(ctx context.Context, tx bun.IDB, sweepID, id int64, attempts int, lastErr error) error {
			return gaveUp(ctx, rec, log, tx, sweepID, id, attempts, lastErr)
		},
		Text: spec.ErrorText}
}

// sweep looks record id's name up and deletes its records, holding the row's lock meanwhile.
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
		if err := rec.RecordTx(ctx, tx, spec.Event("dns.leftover.deleted", r.UserID, r.ID,
			map[string]any{"fqdn": r.Fqdn, "providerRecordId": pid, "status": r.Status})); err != nil {
			return err
		}
	}
	return nil
}

// gaveUp logs at WARN and audits (dns.leftover.given_up) a sweep given up: what the row left at
// the provider has to be removed by hand.
func gaveUp(ctx context.Context, rec *audit.Recorder, log *slog.Logger, tx bun.IDB, sweepID, id int64, attempts int, lastErr error) error {
	r := new(Record)
	if err := tx.NewSelect().Model(r).Column("id", "user_id", "fqdn", "marker_token").Where("id = ?", id).Scan(ctx); err != nil {
		return fmt.Errorf("load record %d: %w", id, err)
	}
	log.Warn("dns leftover sweep given up: a record of ours may stay at the provider", "sweep", sweepID, "record", r.ID,
		"fqdn", r.Fqdn, "comment", Marker(r), "attempts", attempts, "error", provision.StoredError(lastErr))
	return rec.RecordTx(ctx, tx, spec.Event("dns.leftover.given_up", r.UserID, r.ID,
		map[string]any{"fqdn": r.Fqdn, "comment": Marker(r), "attempts": attempts, "error": spec.ErrorText(lastErr)}))
}
