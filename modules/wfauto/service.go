package wfauto

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/authn"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
)

// Kind is the provisioner kind of workflow-automation accounts.
const Kind provision.Kind = "wfauto"

// requestGrace is how long the finisher leaves an account alone that a request stored (or set
// Pending again) and drives itself.
const requestGrace = time.Minute

// Service manages accounts: local state first, then the cell.
type Service struct {
	db       *bun.DB
	cell     *Cell
	audit    *audit.Recorder
	finisher *provision.Finisher
}

// Provision stores (or, after a failure, reuses) the user's Pending account and drives it once.
// It returns the account as it then stands and the attempt's error. When the user was deleted
// meanwhile (the account then goes Deprovisioning: the finisher deletes it at the cell if the
// create reached it), the answer is that of a missing user: 404 "User not found", or 401 for the
// user's own request (authn.UserGone).
func (s *Service) Provision(ctx context.Context, userID int64) (*Account, error) {
	if !s.cell.Configured() {
		return nil, httpx.Unavailable("Workflow automation is not configured (WfautoProvisioning:BaseUrl)")
	}
	var id int64
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := db.LockLiveUser(ctx, tx, userID); err != nil {
			return err
		}
		cur := new(Account)
		err := tx.NewSelect().Model(cur).Where("user_id = ?", userID).Where("status <> ?", StatusDeprovisioned).For("UPDATE").Scan(ctx)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			// The request drives the row itself; the finisher leaves it alone for a minute (it
			// finishes it only if this request dies first). A zero time here was stored as
			// 0001-01-01: due at once, ahead of every other row.
			acc := &Account{UserID: userID, Status: StatusPending, NextAttemptAt: time.Now().Add(requestGrace)}
			if _, err := tx.NewInsert().Model(acc).Returning("*").Exec(ctx); err != nil {
				if db.IsUniqueViolation(err) {
					return httpx.Conflict("A workflow-automation account is already being provisioned")
				}
				return fmt.Errorf("store account intent: %w", err)
			}
			id = acc.ID
		case err != nil:
			return fmt.Errorf("load account: %w", err)
		case cur.Status == StatusFailed:
			// Try again with the same row, so the cell sees the same Idempotency-Key.
			if _, err := tx.NewUpdate().Model(cur).Set("status = ?", StatusPending).Set("attempts = 0").Set("error_message = ''").
				Set("last_error = ''").Set("next_attempt_at = ?", time.Now().Add(requestGrace)).Set("updated_at = now()").WherePK().Exec(ctx); err != nil {
				return fmt.Errorf("retry account: %w", err)
			}
			id = cur.ID
		default:
			return httpx.Conflict(fmt.Sprintf("The user already has a workflow-automation account (%s)", cur.Status))
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "wfauto.provision.requested", UserID: audit.Int64(userID),
			TargetType: "wfautoAccount", TargetID: fmt.Sprint(id)})
	})
	if err != nil {
		return nil, err
	}
	a, err := s.drive(ctx, id)
	if a != nil && (a.Status == StatusDeprovisioning || a.Status == StatusDeprovisioned) {
		return nil, authn.UserGone(ctx, userID)
	}
	return a, err
}

func (s *Service) drive(ctx context.Context, id int64) (*Account, error) {
	driveErr := s.finisher.DriveNow(ctx, Kind, id)
	acc, err := s.get(context.WithoutCancel(ctx), id)
	if err != nil {
		return nil, err
	}
	return acc, driveErr
}

func (s *Service) get(ctx context.Context, id int64) (*Account, error) {
	a := new(Account)
	if err := s.db.NewSelect().Model(a).Where("id = ?", id).Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, httpx.NotFound("Account not found")
		}
		return nil, fmt.Errorf("load account %d: %w", id, err)
	}
	return a, nil
}

// List returns the user's accounts.
func (s *Service) List(ctx context.Context, userID int64) ([]View, error) {
	var rows []Account
	if err := s.db.NewSelect().Model(&rows).Where("user_id = ?", userID).OrderExpr("id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list accounts: %w", err)
	}
	out := make([]View, len(rows))
	for i := range rows {
		out[i] = view(&rows[i])
	}
	return out, nil
}

// Retry provisions a Failed account again, or drives a Pending or Deprovisioning one now.
func (s *Service) Retry(ctx context.Context, id int64) (*Account, error) {
	a, err := s.get(ctx, id)
	if err != nil {
		return nil, err
	}
	switch a.Status {
	case StatusFailed:
		return s.Provision(ctx, a.UserID)
	case StatusPending, StatusDeprovisioning:
		if err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
			_, err := tx.NewUpdate().Model(a).Set("next_attempt_at = now()").WherePK().Exec(ctx)
			return err
		}); err != nil {
			return nil, err
		}
		return s.drive(ctx, id)
	}
	return nil, httpx.Conflict(fmt.Sprintf("Nothing to retry: the account is %s", a.Status))
}

// AdminFilter narrows the administrators' list.
type AdminFilter struct {
	UserID int64
	Status string
	httpx.PageQuery
}

// AdminList pages through every account.
func (s *Service) AdminList(ctx context.Context, f AdminFilter) (httpx.Page[View], error) {
	var rows []Account
	q := s.db.NewSelect().Model(&rows)
	if f.UserID > 0 {
		q = q.Where("user_id = ?", f.UserID)
	}
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	return db.ListPage(ctx, q, &rows, f.PageQuery, view)
}
