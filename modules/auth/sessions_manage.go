package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/authn"
	"provisioner/platform/db"
	"provisioner/platform/fault"
)

// SessionView is a sign-in session as the API shows it.
type SessionView struct {
	ID         int64      `json:"id" example:"7"`
	Provider   string     `json:"provider" enum:"Password,GitHub,Google" example:"Password" doc:"How the session signed in."`
	IP         string     `json:"ip" example:"203.0.113.7" doc:"The client IP of the sign-in or of the last refresh."`
	UserAgent  string     `json:"userAgent" doc:"The User-Agent of the sign-in or of the last refresh (at most 512 bytes)."`
	MFALevel   string     `json:"mfaLevel" enum:"aal1,aal2" example:"aal1" doc:"aal2 once the session passed a second factor, else aal1."`
	MFAAt      *time.Time `json:"mfaAt" doc:"When the session last passed a second factor; null if never."`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt time.Time  `json:"lastUsedAt" doc:"The sign-in or the last refresh."`
	ExpiresAt  time.Time  `json:"expiresAt" doc:"When its refresh token expires unless refreshed before."`
	Current    bool       `json:"current" doc:"True for the session of the token this request carried."`
}

func sessionView(s *session, current int64) SessionView {
	v := SessionView{ID: s.ID, Provider: s.Provider, IP: s.IP, UserAgent: s.UserAgent, MFALevel: "aal1",
		CreatedAt: s.CreatedAt.UTC(), LastUsedAt: s.LastUsedAt.UTC(), ExpiresAt: s.ExpiresAt.UTC(), Current: s.ID == current}
	if s.MFAAt != nil {
		at := s.MFAAt.UTC()
		v.MFALevel, v.MFAAt = "aal2", &at
	}
	return v
}

// liveSessions selects the sessions of userID that still live: not ended, refresh not expired, and
// started with the user's current security stamp (a password reset or a deletion ends the others).
func (s *Sessions) liveSessions(q *bun.SelectQuery, userID int64) *bun.SelectQuery {
	return q.Where("user_id = ?", userID).Where("revoked_at IS NULL").Where("expires_at > now()").
		Where("stamp = (SELECT u.security_stamp FROM users AS u WHERE u.id = ? AND u.deleted_at IS NULL)", userID)
}

// List is the live sessions of the principal, newest first; its own is marked current.
func (s *Sessions) List(ctx context.Context, p *authn.Principal) ([]SessionView, error) {
	var rows []session
	if err := s.liveSessions(s.db.NewSelect().Model(&rows), p.UserID).OrderExpr("created_at DESC, id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out := make([]SessionView, len(rows))
	for i := range rows {
		out[i] = sessionView(&rows[i], p.SessionID)
	}
	return out, nil
}

// ListOf is one page of the live sessions of user userID (an admin's view), newest first, and
// their number; a missing or deleted user is a 404.
func (s *Sessions) ListOf(ctx context.Context, userID int64, offset, limit int64) ([]SessionView, int64, error) {
	if err := s.userExists(ctx, s.db, userID); err != nil {
		return nil, 0, err
	}
	var rows []session
	total, err := s.liveSessions(s.db.NewSelect().Model(&rows), userID).OrderExpr("created_at DESC, id DESC").
		Offset(offset).Limit(limit).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list sessions: %w", err)
	}
	out := make([]SessionView, len(rows))
	for i := range rows {
		out[i] = sessionView(&rows[i], 0)
	}
	return out, total, nil
}

func (s *Sessions) userExists(ctx context.Context, d bun.IDB, userID int64) error {
	var live bool
	err := d.NewSelect().Table("users").ColumnExpr("deleted_at IS NULL").Where("id = ?", userID).Scan(ctx, &live)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !live) {
		return authn.UserGone(ctx, userID)
	}
	if err != nil {
		return fmt.Errorf("find user %d: %w", userID, err)
	}
	return nil
}

// Logout ends the principal's own session: its access tokens are refused from the next request
// on, on every replica, and its refresh token no longer works.
func (s *Sessions) Logout(ctx context.Context, p *authn.Principal) error {
	return db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		return s.endTx(ctx, tx, p.UserID, []int64{p.SessionID}, endLogout, nil)
	})
}

// End ends one live session of the principal; another user's, an ended or an unknown one is a 404.
func (s *Sessions) End(ctx context.Context, p *authn.Principal, id int64) error {
	return db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		n, err := s.endCount(ctx, tx, p.UserID, []int64{id}, endByUser, nil)
		if err == nil && n == 0 {
			return fault.NotFound("Session not found")
		}
		return err
	})
}

// EndOthers ends every live session of the principal but its own; it answers how many ended.
func (s *Sessions) EndOthers(ctx context.Context, p *authn.Principal) (int, error) {
	var n int
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		var err error
		n, err = s.endCount(ctx, tx, p.UserID, nil, endByUser, []int64{p.SessionID})
		return err
	})
	return n, err
}

// EndAllOf ends every live session of user userID (an admin's request; the admin's own included
// when it is theirs); a missing or deleted user is a 404. It answers how many ended.
func (s *Sessions) EndAllOf(ctx context.Context, userID int64) (int, error) {
	var n int
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := s.userExists(ctx, tx, userID); err != nil {
			return err
		}
		var err error
		n, err = s.endCount(ctx, tx, userID, nil, endByAdmin, nil)
		return err
	})
	return n, err
}

// passedMFA records that the principal's session passed a second factor now.
func (s *Sessions) passedMFA(ctx context.Context, tx bun.IDB, sessionID int64) (time.Time, error) {
	var at time.Time
	err := tx.NewUpdate().Model((*session)(nil)).Set("mfa_at = now()").Where("id = ?", sessionID).
		Returning("mfa_at").Scan(ctx, &at)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return at, fmt.Errorf("record second factor: %w", err)
	}
	return at.UTC(), nil
}
