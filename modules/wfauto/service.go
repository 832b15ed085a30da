package wfauto

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"provisioner/modules/wfauto/cell"
	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/provision"
)

// Kind is the provisioner kind of workflow-automation accounts.
const Kind provision.Kind = "wfauto"

// spec is the accounts' lifecycle: Pending → Active or Failed; Deprovisioning → Deprovisioned.
var spec = provision.Spec{Name: Kind, Rows: "wfauto_accounts", Creating: "Pending", Active: "Active", Failed: "Failed",
	Deleting: "Deprovisioning", Gone: "Deprovisioned", Target: "wfautoAccount",
	Texts: provision.Texts{Internal: MsgInternal, Provider: []func(error) bool{provision.IsA[*cell.Error]}}}

// Service manages accounts: local state first, then the cell.
type Service struct {
	db       *bun.DB
	cell     *cell.Client
	audit    *audit.Recorder
	finisher *provision.Finisher
}

// Provision stores (or, after a failure, reuses) the user's Pending account and drives it once:
// the account as it then stands and the outcome. A user deleted meanwhile is answered as missing
// (db.UserGone); the finisher deletes the account at the cell.
func (s *Service) Provision(ctx context.Context, userID int64) (*Account, provision.Outcome, error) {
	if !s.cell.Configured() {
		return nil, provision.Outcome{}, fault.Unavailable("Workflow automation is not configured (WfautoProvisioning:BaseUrl)")
	}
	var id int64
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := db.LockLiveUser(ctx, tx, userID); err != nil {
			return err
		}
		cur := new(Account)
		err := tx.NewSelect().Model(cur).Where("user_id = ?", userID).Where("status <> ?", spec.Gone).For("UPDATE").Scan(ctx)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			acc := &Account{State: spec.Intent(userID)}
			if _, err := tx.NewInsert().Model(acc).Returning("*").Exec(ctx); err != nil {
				if db.IsUniqueViolation(err) {
					return fault.Conflict("A workflow-automation account is already being provisioned")
				}
				return fmt.Errorf("store account intent: %w", err)
			}
			id = acc.ID
		case err != nil:
			return fmt.Errorf("load account: %w", err)
		case cur.Status == spec.Failed:
			// Try again with the same row, so the cell sees the same Idempotency-Key.
			if _, err := provision.Restart(tx.NewUpdate().Model(cur), spec.Creating, spec.Intent(userID).NextAttemptAt).WherePK().Exec(ctx); err != nil {
				return fmt.Errorf("retry account: %w", err)
			}
			id = cur.ID
		default:
			return fault.Conflict(fmt.Sprintf("The user already has a workflow-automation account (%s)", cur.Status))
		}
		return s.audit.RecordTx(ctx, tx, spec.Event("wfauto.provision.requested", userID, id, nil))
	})
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	a, o, err := provision.Run[Account](ctx, s.finisher, s.db, spec, id, provision.Stored)
	if a != nil && (a.Status == spec.Deleting || a.Status == spec.Gone) {
		return nil, provision.Outcome{}, db.UserGone(ctx, userID)
	}
	return a, o, err
}

// msgNotFound is the 404 of an account.
const msgNotFound = "Account not found"

// List returns the user's accounts.
func (s *Service) List(ctx context.Context, userID int64) ([]View, error) {
	return provision.List(ctx, s.db, userID, nil, view)
}

// Retry provisions a Failed account again, or drives a Pending or Deprovisioning one now.
func (s *Service) Retry(ctx context.Context, id int64) (*Account, provision.Outcome, error) {
	a, err := provision.Find[Account](ctx, s.db, id, msgNotFound)
	if err != nil {
		return nil, provision.Outcome{}, err
	}
	switch a.Status {
	case spec.Failed:
		return s.Provision(ctx, a.UserID)
	case spec.Creating, spec.Deleting:
		if _, err := provision.Nudge(s.db.NewUpdate().Model(a)).WherePK().Exec(ctx); err != nil {
			return nil, provision.Outcome{}, err
		}
		return provision.Run[Account](ctx, s.finisher, s.db, spec, id, provision.Again)
	}
	return nil, provision.Outcome{}, fault.Conflict(fmt.Sprintf("Nothing to retry: the account is %s", a.Status))
}
