package queues

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// Takeover revokes the queue-space passwords of an account a password reset takes over: each
// space that may exist at the broker gets a new password, set there by the next create (an Active
// space goes Provisioning for it, and its open connections are closed once it is set).
type Takeover struct {
	svc *Service
	log *slog.Logger
}

// followTimeout bounds how long a reset's answer waits for the broker.
const followTimeout = 5 * time.Second

// RevokeOnTakeover implements provision.TakeoverRevoker, within the reset's transaction.
func (t *Takeover) RevokeOnTakeover(ctx context.Context, tx bun.IDB, userID int64) (map[string]any, error) {
	var spaces []Space
	if err := tx.NewSelect().Model(&spaces).Where("user_id = ?", userID).
		Where("status IN (?)", bun.In([]string{StatusProvisioning, StatusActive, StatusFailed})).OrderExpr("id").For("UPDATE").
		Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("list queue spaces of user %d: %w", userID, err)
	}
	if len(spaces) == 0 {
		return map[string]any{}, nil
	}
	ids := make([]int64, 0, len(spaces))
	for _, s := range spaces {
		sealed, err := t.svc.sealer.Seal([]byte(secrets.RandomPassword()), passwordAAD(s.Username))
		if err != nil {
			return nil, err
		}
		q := tx.NewUpdate().Model((*Space)(nil)).Set("password_sealed = ?", sealed).Set("password_pending = true").Where("id = ?", s.ID)
		if s.Status == StatusActive {
			q = provision.Restart(q, StatusProvisioning, time.Time{})
		} else {
			q = q.Set("updated_at = now()")
		}
		if _, err := q.Exec(ctx); err != nil {
			return nil, fmt.Errorf("store the new password of queue space %d: %w", s.ID, err)
		}
		if err := t.svc.audit.RecordTx(ctx, tx, spec.Event("queues.password.rotated", userID, s.ID, map[string]any{"reason": "takeover"})); err != nil {
			return nil, err
		}
		ids = append(ids, s.ID)
	}
	return map[string]any{"queueSpacePasswordsRotated": ids}, nil
}

// FollowTakeover implements provision.TakeoverFollower: once the reset has committed, the spaces
// it left Provisioning are driven now (within followTimeout; the finisher does the rest).
func (t *Takeover) FollowTakeover(ctx context.Context, userID int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), followTimeout)
	defer cancel()
	var ids []int64
	if err := t.svc.db.NewSelect().Model((*Space)(nil)).Column("id").Where("user_id = ?", userID).
		Where("status = ?", StatusProvisioning).OrderExpr("id").Scan(ctx, &ids); err != nil {
		t.log.WarnContext(ctx, "list queue spaces to drive", "user", userID, "error", err.Error())
		return
	}
	for _, id := range ids {
		if err := t.svc.finisher.DriveNow(ctx, Kind, id); err != nil {
			t.log.WarnContext(ctx, "queue space password left to the finisher", "space", id, "error", err.Error())
		}
	}
}

var (
	_ provision.TakeoverRevoker  = (*Takeover)(nil)
	_ provision.TakeoverFollower = (*Takeover)(nil)
)
