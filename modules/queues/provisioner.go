package queues

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// Kind is the provisioner kind of queue spaces.
const Kind provision.Kind = "queues"

// Provisioner makes and removes queue spaces at the broker. Every create looks its names up first
// and makes only what is missing, so an attempt repeated after a crash or a lost answer adopts
// what the earlier one made and never makes anything twice; the space is Active only once the
// broker lists the user's permissions on the virtual host.
type Provisioner struct {
	provision.Spec
	broker *Broker
	sealer *secrets.Sealer
	audit  *audit.Recorder
	log    *slog.Logger
}

// passwordAAD binds a sealed password to its user name.
func passwordAAD(username string) string { return "queues:" + username }

// description is what the space's virtual host says about it at the broker: whose it is.
func description(s *Space) string {
	return fmt.Sprintf("provisioner queue space %d of user %d", s.ID, s.UserID)
}

// Create implements provision.Provisioner: the virtual host, its limits, the user and the user's
// permissions, each looked up first; then Active.
func (p *Provisioner) Create(ctx context.Context, req provision.CreateRequest) (provision.CreateResponse, error) {
	s, err := provision.Load[Space](ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.CreateResponse{}, err
	}
	if err := p.make(ctx, s); err != nil {
		var be *BrokerError
		if errors.As(err, &be) && be.Final {
			return provision.CreateResponse{}, p.failed(ctx, req.Tx, s, be.Error())
		}
		return provision.CreateResponse{}, err // the finisher records the attempt and retries
	}
	if _, err := provision.Succeed(req.Tx.NewUpdate().Model(s), StatusActive).Set("password_pending = false").WherePK().Exec(ctx); err != nil {
		return provision.CreateResponse{}, fmt.Errorf("record queue space %d active: %w", s.ID, err)
	}
	if err := p.audit.RecordTx(ctx, req.Tx, spec.Event("queues.created", s.UserID, s.ID, map[string]any{"vhost": s.VHost})); err != nil {
		return provision.CreateResponse{}, err
	}
	return provision.CreateResponse{ExternalID: s.VHost}, nil
}

// make brings the broker to hold s: what is already there (an earlier attempt's) is kept. The
// limits are set before the user may log in, and the final read proves the whole chain exists.
func (p *Provisioner) make(ctx context.Context, s *Space) error {
	v, err := p.broker.LookupVHost(ctx, s.VHost)
	if err != nil {
		return err
	}
	if v == nil {
		if err := p.broker.PutVHost(ctx, s.VHost, description(s)); err != nil {
			return err
		}
	}
	if err := p.broker.LimitVHost(ctx, s.VHost, s.MaxConnections, s.MaxQueues); err != nil {
		return err
	}
	u, err := p.broker.LookupUser(ctx, s.Username)
	if err != nil {
		return err
	}
	if u == nil || s.PasswordPending {
		pw, err := p.sealer.Open(s.PasswordSealed, passwordAAD(s.Username))
		if err != nil {
			return fmt.Errorf("open the password of queue space %d: %w", s.ID, err)
		}
		if err := p.broker.PutUser(ctx, s.Username, string(pw)); err != nil {
			return err
		}
	}
	if err := p.broker.Grant(ctx, s.VHost, s.Username); err != nil {
		return err
	}
	perm, err := p.broker.LookupPermission(ctx, s.VHost, s.Username)
	if err != nil {
		return err
	}
	if perm == nil {
		return &BrokerError{Op: "GET /api/permissions/…", Msg: "the permissions just granted are not listed"}
	}
	if s.PasswordPending { // sessions opened with the old password end too
		return p.broker.CloseConnections(ctx, s.Username)
	}
	return nil
}

// failed records a refusal no retry changes: Failed with the broker's words, and what the attempts
// may have made is removed (now, or by a sweep when the broker does not answer).
func (p *Provisioner) failed(ctx context.Context, tx bun.IDB, s *Space, msg string) error {
	if _, err := provision.Fail(tx.NewUpdate().Model(s), StatusFailed, msg).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("record queue space %d failed: %w", s.ID, err)
	}
	if err := p.remove(ctx, s); err != nil {
		if err := queueSweep(ctx, tx, s.ID); err != nil {
			return err
		}
	}
	return p.audit.RecordTx(ctx, tx, spec.Event("queues.failed", s.UserID, s.ID, map[string]any{"error": msg}))
}

// remove deletes s's user (no login from then on) and its virtual host (its queues and open
// connections with it) at the broker; what is gone already is not an error.
func (p *Provisioner) remove(ctx context.Context, s *Space) error {
	if err := p.broker.DeleteUser(ctx, s.Username); err != nil {
		return err
	}
	return p.broker.DeleteVHost(ctx, s.VHost)
}

// Delete implements provision.Provisioner.
func (p *Provisioner) Delete(ctx context.Context, req provision.DeleteRequest) (provision.DeleteResponse, error) {
	s, err := provision.Load[Space](ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.DeleteResponse{}, err
	}
	if err := p.remove(ctx, s); err != nil {
		return provision.DeleteResponse{}, err
	}
	if _, err := provision.Succeed(req.Tx.NewUpdate().Model(s), StatusDeleted).WherePK().Exec(ctx); err != nil {
		return provision.DeleteResponse{}, fmt.Errorf("record queue space %d deleted: %w", s.ID, err)
	}
	return provision.DeleteResponse{}, nil
}

// MsgInternal is what is stored and shown for a failed attempt whose error is not the broker's
// (our database's, with its SQL, is only logged).
const MsgInternal = "internal error while handling the broker's answer (details in the server log)"

// GiveUp marks a space whose attempts ran out Failed and queues a sweep: an attempt without an
// answer may have made its virtual host or user. Deletions are never given up.
func (p *Provisioner) GiveUp(ctx context.Context, tx bun.IDB, id int64, lastErr error) error {
	if ended, err := p.GaveUp(ctx, tx, id, lastErr); err != nil || !ended {
		return err
	}
	return queueSweep(ctx, tx, id)
}

// ReleaseUser marks a deleted user's spaces Deleting (Failed ones too: an attempt may have left
// something at the broker); the finisher removes them. Each is audited as queues.deleted.
func (p *Provisioner) ReleaseUser(ctx context.Context, tx bun.IDB, userID int64) error {
	ids, err := p.Release(ctx, tx, (*Space)(nil), userID, []string{StatusProvisioning, StatusActive, StatusFailed})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := p.audit.RecordTx(ctx, tx, spec.Event("queues.deleted", userID, id, map[string]any{"reason": "user.deleted"})); err != nil {
			return err
		}
	}
	return nil
}

var _ provision.RetryAfterer = (*BrokerError)(nil)
