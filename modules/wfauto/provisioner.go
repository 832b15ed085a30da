package wfauto

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/provision"
)

// Provisioner provisions accounts at the cell, with the row's id as Idempotency-Key: an attempt
// repeated after a crash gets the same account back, never a second one. Before each create it
// commits a row in wfauto_cell_creates (the intent of that call), so a delete knows whether the
// cell may hold the account at all.
type Provisioner struct {
	db    *bun.DB
	cell  *Cell
	audit *audit.Recorder
}

// Kind implements provision.Provisioner.
func (p *Provisioner) Kind() provision.Kind { return Kind }

// Table implements provision.Queue.
func (p *Provisioner) Table() string { return "wfauto_accounts" }

// InFlight implements provision.Queue.
func (p *Provisioner) InFlight() map[string]provision.Verb {
	return map[string]provision.Verb{StatusPending: provision.VerbCreate, StatusDeprovisioning: provision.VerbDelete}
}

func idemKey(id int64) string { return fmt.Sprint(id) }

// markSent commits, on a connection of its own (the row's transaction would roll it back with a
// crash), that a create of account id may reach the cell. fresh reports that no earlier attempt
// may have reached it.
func (p *Provisioner) markSent(ctx context.Context, id int64) (fresh bool, err error) {
	res, err := p.db.ExecContext(ctx, "INSERT INTO wfauto_cell_creates (account_id) VALUES (?) ON CONFLICT DO NOTHING", id)
	if err != nil {
		return false, fmt.Errorf("record the create of account %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// unmarkSent records, within tx, that the cell holds nothing for account id.
func unmarkSent(ctx context.Context, tx bun.IDB, id int64) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM wfauto_cell_creates WHERE account_id = ?", id); err != nil {
		return fmt.Errorf("record that account %d is not at the cell: %w", id, err)
	}
	return nil
}

// mayBeSent reports whether a create of account id may have reached the cell.
func mayBeSent(ctx context.Context, tx bun.IDB, id int64) (bool, error) {
	n, err := tx.NewSelect().Table("wfauto_cell_creates").Where("account_id = ?", id).Count(ctx)
	if err != nil {
		return false, fmt.Errorf("was account %d sent: %w", id, err)
	}
	return n > 0, nil
}

func (p *Provisioner) load(ctx context.Context, tx bun.IDB, id int64) (*Account, CellRequest, error) {
	a := new(Account)
	if err := tx.NewSelect().Model(a).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, CellRequest{}, fmt.Errorf("load account %d: %w", id, err)
	}
	in := CellRequest{UserID: a.UserID}
	if err := tx.NewSelect().Table("users").Column("email", "full_name", "organization").Where("id = ?", a.UserID).
		Scan(ctx, &in.Email, &in.FullName, &in.Organization); err != nil {
		return nil, CellRequest{}, fmt.Errorf("load owner of account %d: %w", id, err)
	}
	return a, in, nil
}

// Create implements provision.Provisioner.
func (p *Provisioner) Create(ctx context.Context, req provision.CreateRequest) (provision.CreateResponse, error) {
	a, in, err := p.load(ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.CreateResponse{}, err
	}
	fresh, err := p.markSent(ctx, a.ID)
	if err != nil {
		return provision.CreateResponse{}, err // nothing sent: retried
	}
	got, err := p.cell.Provision(ctx, idemKey(a.ID), in)
	var ce *CellError
	if errors.As(err, &ce) && fresh && ce.madeNothing() {
		// Only this attempt could have reached the cell, and it made nothing there.
		if uerr := unmarkSent(ctx, req.Tx, a.ID); uerr != nil {
			return provision.CreateResponse{}, uerr
		}
	}
	if errors.As(err, &ce) && ce.Final {
		if _, uerr := req.Tx.NewUpdate().Model(a).Set("status = ?", StatusFailed).Set("error_message = ?", ce.Error()).
			Set("updated_at = now()").WherePK().Exec(ctx); uerr != nil {
			return provision.CreateResponse{}, uerr
		}
		return provision.CreateResponse{}, p.audit.RecordTx(ctx, req.Tx, audit.Event{Action: "wfauto.failed", UserID: audit.Int64(a.UserID),
			TargetType: "wfautoAccount", TargetID: fmt.Sprint(a.ID), Details: map[string]any{"error": ce.Error()}})
	}
	if err != nil {
		return provision.CreateResponse{}, err // transient: retried with the same Idempotency-Key
	}
	if _, err := req.Tx.NewUpdate().Model(a).Set("status = ?", StatusActive).Set("external_account_id = ?", got.AccountID).
		Set("url = ?", got.URL).Set("error_message = ''").Set("last_error = ''").Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
		return provision.CreateResponse{}, fmt.Errorf("record account %d active: %w", a.ID, err)
	}
	if err := p.audit.RecordTx(ctx, req.Tx, audit.Event{Action: "wfauto.provisioned", UserID: audit.Int64(a.UserID),
		TargetType: "wfautoAccount", TargetID: fmt.Sprint(a.ID), Details: map[string]any{"externalAccountId": got.AccountID}}); err != nil {
		return provision.CreateResponse{}, err
	}
	return provision.CreateResponse{ExternalID: got.AccountID}, nil
}

// Delete implements provision.Provisioner. An account never sent to the cell (its owner deleted
// before the first attempt), or whose only attempt was refused or never left, is not at the cell:
// the cell is not called. One whose outcome was never recorded may still exist there: re-posting
// its Idempotency-Key returns it (the cell has no lookup), and it is deleted.
func (p *Provisioner) Delete(ctx context.Context, req provision.DeleteRequest) (provision.DeleteResponse, error) {
	a, in, err := p.load(ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.DeleteResponse{}, err
	}
	accountID := a.ExternalAccountID
	sent := accountID != ""
	if !sent {
		if sent, err = mayBeSent(ctx, req.Tx, a.ID); err != nil {
			return provision.DeleteResponse{}, err
		}
	}
	if accountID == "" && sent {
		// Never recorded (a crash, a timeout, or a Failed account whose attempts ran out after
		// its create may have reached the cell): the Idempotency-Key tells us its id.
		got, err := p.cell.Provision(ctx, idemKey(a.ID), in)
		var ce *CellError
		switch {
		case errors.As(err, &ce) && ce.Final:
			// The cell refuses it: nothing exists there.
		case err != nil:
			return provision.DeleteResponse{}, err
		default:
			accountID = got.AccountID
		}
	}
	if accountID != "" {
		if err := p.cell.Deprovision(ctx, accountID); err != nil {
			return provision.DeleteResponse{}, err
		}
	}
	if _, err := req.Tx.NewUpdate().Model(a).Set("status = ?", StatusDeprovisioned).Set("last_error = ''").
		Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
		return provision.DeleteResponse{}, fmt.Errorf("record account %d deprovisioned: %w", a.ID, err)
	}
	if err := unmarkSent(ctx, req.Tx, a.ID); err != nil {
		return provision.DeleteResponse{}, err
	}
	return provision.DeleteResponse{}, p.audit.RecordTx(ctx, req.Tx, audit.Event{Action: "wfauto.deprovisioned",
		UserID: audit.Int64(a.UserID), TargetType: "wfautoAccount", TargetID: fmt.Sprint(a.ID)})
}

// GiveUp marks an account whose provisioning kept failing Failed, with its last error.
func (p *Provisioner) GiveUp(ctx context.Context, tx bun.IDB, id int64, lastErr error) error {
	_, err := tx.NewUpdate().Model((*Account)(nil)).Set("status = ?", StatusFailed).Set("error_message = ?", provision.StoredError(lastErr)).
		Set("updated_at = now()").Where("id = ?", id).Where("status = ?", StatusPending).Exec(ctx)
	return err
}

// ReleaseUser marks a deleted user's account for deprovisioning at the cell: Pending, Active and
// Failed alike. A Failed account's create may have reached the cell (a timeout, then attempts ran
// out): the finisher re-posts its Idempotency-Key to learn its id and deletes it there before it
// is Deprovisioned. One never sent (or only refused) is Deprovisioned without calling the cell.
func (p *Provisioner) ReleaseUser(ctx context.Context, tx bun.IDB, userID int64) error {
	if _, err := tx.NewUpdate().Model((*Account)(nil)).Set("status = ?", StatusDeprovisioning).Set("attempts = 0").
		Set("error_message = ''").Set("last_error = ''").Set("next_attempt_at = now()").Set("updated_at = now()").
		Where("user_id = ?", userID).Where("status IN (?)", bun.In([]string{StatusPending, StatusActive, StatusFailed})).Exec(ctx); err != nil {
		return fmt.Errorf("release accounts of user %d: %w", userID, err)
	}
	return nil
}

var (
	_ provision.Provisioner  = (*Provisioner)(nil)
	_ provision.Queue        = (*Provisioner)(nil)
	_ provision.GiveUpper    = (*Provisioner)(nil)
	_ provision.UserReleaser = (*Provisioner)(nil)
	_ provision.RetryAfterer = (*CellError)(nil)
)
