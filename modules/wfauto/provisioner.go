package wfauto

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"

	"github.com/uptrace/bun"

	"provisioner/modules/wfauto/cell"
	"provisioner/platform/audit"
	"provisioner/platform/authn"
	"provisioner/platform/provision"
)

// Provisioner provisions accounts at the cell with the row's random Idempotency-Key, so an attempt
// repeated after a crash gets the same account back. Before each create it commits the body sent
// (sent), so a delete knows whether the cell may hold the account at all.
type Provisioner struct {
	provision.Spec
	db    *bun.DB
	cell  *cell.Client
	audit *audit.Recorder
	log   *slog.Logger
}

// sent records, before each create, that it may reach the cell, with the body sent.
var sent = provision.SentMarker{Table: "wfauto_cell_creates", Ref: "account_id"}

// refusedOriginal reports whether err is the cell's 400 to the body first sent under the key: the
// cell holds no account for it. Nothing else says so (a 409, 422, 401/403/404, a malformed 2xx).
func refusedOriginal(err error, original bool) bool {
	var ce *cell.Error
	return original && errors.As(err, &ce) && ce.Final && ce.Status == http.StatusBadRequest
}

// current is the body of a's first create: its owner's details as they are now.
func current(ctx context.Context, tx bun.IDB, a *Account) ([]byte, error) {
	in := cell.Request{UserID: a.UserID}
	if err := tx.NewSelect().Table("users").Column("email", "full_name", "organization").Where("id = ?", a.UserID).
		Scan(ctx, &in.Email, &in.FullName, &in.Organization); err != nil {
		return nil, fmt.Errorf("load owner of account %d: %w", a.ID, err)
	}
	return in.JSON(), nil
}

// Create implements provision.Provisioner. A create that may follow one that reached the cell sends
// that one's body again: the Idempotency-Key must come with the same body.
func (p *Provisioner) Create(ctx context.Context, req provision.CreateRequest) (provision.CreateResponse, error) {
	a, err := provision.Load[Account](ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.CreateResponse{}, err
	}
	body, err := current(ctx, req.Tx, a)
	if err != nil {
		return provision.CreateResponse{}, err
	}
	body, fresh, original, err := sent.Mark(ctx, p.db, a.ID, body)
	if err != nil {
		return provision.CreateResponse{}, err // nothing sent: retried
	}
	got, err := p.cell.Provision(ctx, a.IdempotencyKey, body)
	if field := cell.OtherUser(got, body, original); err == nil && field != "" {
		// An account made for another user (a key another deployment sent first): never Active.
		err = &cell.Error{Status: http.StatusBadGateway, Msg: fmt.Sprintf(cell.MsgOtherUser, field), Final: true, Foreign: true}
	}
	var ce *cell.Error
	if errors.As(err, &ce) && ((fresh && ce.MadeNothing()) || refusedOriginal(err, original) || ce.Foreign) {
		// The cell holds nothing of ours under the key: a next create sends the owner's details anew.
		if uerr := sent.Unmark(ctx, req.Tx, a.ID); uerr != nil {
			return provision.CreateResponse{}, uerr
		}
	}
	if errors.As(err, &ce) && ce.Final {
		// A Foreign key is another's at the cell: provisioning again sends a fresh one.
		return provision.CreateResponse{}, p.fail(ctx, req.Tx, a, ce.Error(), ce.Foreign, nil)
	}
	if err != nil {
		return provision.CreateResponse{}, err // transient: retried with the same Idempotency-Key
	}
	if held, err := spec.HeldByAnother(ctx, req.Tx, "external_account_id", got.AccountID, a.ID); err != nil {
		return provision.CreateResponse{}, err
	} else if held {
		// Another live account's id: stored, deleting this one would delete that one. Failed.
		msg := (&cell.Error{Status: http.StatusBadGateway, Msg: msgDuplicateID}).Error()
		return provision.CreateResponse{}, p.fail(ctx, req.Tx, a, msg, false, map[string]any{"externalAccountId": got.AccountID})
	}
	if _, err := provision.Succeed(req.Tx.NewUpdate().Model(a), spec.Active).Set("external_account_id = ?", got.AccountID).
		Set("url = ?", got.URL).WherePK().Exec(ctx); err != nil {
		return provision.CreateResponse{}, fmt.Errorf("record account %d active: %w", a.ID, err)
	}
	if err := p.audit.RecordTx(ctx, req.Tx, spec.Event("wfauto.provisioned", a.UserID, a.ID, map[string]any{"externalAccountId": got.AccountID})); err != nil {
		return provision.CreateResponse{}, err
	}
	return provision.CreateResponse{ExternalID: got.AccountID}, nil
}

// fail records a's create Failed with msg, audited wfauto.failed; newKey gives a a fresh key.
func (p *Provisioner) fail(ctx context.Context, tx bun.IDB, a *Account, msg string, newKey bool, more map[string]any) error {
	q := provision.Fail(tx.NewUpdate().Model(a), spec.Failed, msg)
	if newKey {
		q = q.Set("idempotency_key = gen_random_uuid()::text")
	}
	if _, err := q.WherePK().Exec(ctx); err != nil {
		return err
	}
	details := map[string]any{"error": msg}
	maps.Copy(details, more)
	return p.audit.RecordTx(ctx, tx, spec.Event("wfauto.failed", a.UserID, a.ID, details))
}

// msgDuplicateID is the error of a cell's answer naming an account another live row holds.
const msgDuplicateID = "suspicious answer: the accountId belongs to another account; refused"

// Delete implements provision.Provisioner. An account never sent, or only refused, is not at the
// cell; otherwise re-posting its key with the same body tells its id (a 400: nothing is there; any
// other refusal: retried) and it is deleted. An id another live account holds, or another user's
// account, is left at the cell, logged and audited (details.leftAtCell).
func (p *Provisioner) Delete(ctx context.Context, req provision.DeleteRequest) (provision.DeleteResponse, error) {
	a, err := provision.Load[Account](ctx, req.Tx, req.ResourceID)
	if err != nil {
		return provision.DeleteResponse{}, err
	}
	accountID, left, why := a.ExternalAccountID, "", "held by another account"
	if accountID != "" {
		held, err := spec.HeldByAnother(ctx, req.Tx, "external_account_id", accountID, a.ID)
		if err != nil {
			return provision.DeleteResponse{}, err
		}
		if held { // the cell holds one account for both rows: deleting it would take the other's
			p.log.Warn("wfauto deprovisioning: the account's accountId is held by another live account; left at the cell",
				"account", a.ID, "externalAccountId", accountID)
			accountID, left = "", accountID
		}
	}
	wasSent, body := a.ExternalAccountID != "", []byte(nil)
	if !wasSent {
		if wasSent, body, err = sent.Sent(ctx, req.Tx, a.ID); err != nil {
			return provision.DeleteResponse{}, err
		}
	}
	if a.ExternalAccountID == "" && wasSent {
		// Never recorded, but its create may have reached the cell: the key tells its id.
		original := body != nil
		if !original { // a record without its body: the owner's current details are the best guess
			if body, err = current(ctx, req.Tx, a); err != nil {
				return provision.DeleteResponse{}, err
			}
		}
		got, err := p.cell.Provision(ctx, a.IdempotencyKey, body)
		var ce *cell.Error
		switch {
		case err == nil && cell.OtherUser(got, body, original) != "":
			// Another user's account (a key another deployment sent first): never deleted for ours.
			p.log.Warn("wfauto deprovisioning: the cell answered the account's Idempotency-Key with an account made for another user; left at the cell",
				"account", a.ID, "externalAccountId", got.AccountID)
			left, why = got.AccountID, "made for another user"
		case err == nil:
			held, herr := spec.HeldByAnother(ctx, req.Tx, "external_account_id", got.AccountID, a.ID)
			if herr != nil {
				return provision.DeleteResponse{}, herr
			}
			if !held {
				accountID = got.AccountID
			} else { // another live account's id: never deleted for this one
				left = got.AccountID
			}
		case refusedOriginal(err, original):
			// The cell refuses the key's own body: nothing exists there.
		case errors.As(err, &ce) && ce.Final:
			return provision.DeleteResponse{}, fmt.Errorf("account %d may be at the cell, which refused the re-post of its "+
				"Idempotency-Key that would tell its id; kept Deprovisioning: %w", a.ID, err)
		default:
			return provision.DeleteResponse{}, err
		}
	}
	if accountID != "" {
		if err := p.cell.Deprovision(ctx, accountID); err != nil {
			return provision.DeleteResponse{}, err
		}
	}
	if _, err := provision.Succeed(req.Tx.NewUpdate().Model(a), spec.Gone).WherePK().Exec(ctx); err != nil {
		return provision.DeleteResponse{}, fmt.Errorf("record account %d deprovisioned: %w", a.ID, err)
	}
	if err := sent.Unmark(ctx, req.Tx, a.ID); err != nil {
		return provision.DeleteResponse{}, err
	}
	// Only a deleted owner's account is deprovisioned: audited with the reason and its deleter.
	details := map[string]any{"reason": "user.deleted"}
	if accountID != "" {
		details["externalAccountId"] = accountID
	}
	if left != "" { // the cell's account was not deleted: another live account holds it, or another user's it is
		details["externalAccountId"] = left
		details["leftAtCell"] = why
	}
	ev := spec.Event("wfauto.deprovisioned", a.UserID, a.ID, details)
	ev.ActorUserID = a.ReleasedBy
	return provision.DeleteResponse{}, p.audit.RecordTx(ctx, req.Tx, ev)
}

// MsgInternal is the errorMessage of a failed attempt whose error is not the cell's (our
// database's, an audit write's): their text is only logged.
const MsgInternal = "internal error while handling the cell's answer (details in the server log)"

// ReleaseUser sets a deleted user's account Deprovisioning, Failed ones too (a create may have
// reached the cell), keeping who deleted the user (released_by) as the actor of the
// wfauto.deprovisioned event written once the cell has deleted the account.
func (p *Provisioner) ReleaseUser(ctx context.Context, tx bun.IDB, userID int64) error {
	var actor *int64
	if pr := authn.FromContext(ctx); pr != nil {
		actor = audit.Int64(pr.UserID)
	}
	_, err := p.Release(ctx, tx, (*Account)(nil), userID, []string{spec.Creating, spec.Active, spec.Failed},
		func(q *bun.UpdateQuery) *bun.UpdateQuery { return q.Set("released_by = ?", actor) })
	return err
}

var _ provision.RetryAfterer = (*cell.Error)(nil)
