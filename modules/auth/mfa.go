package auth

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/fault"
	"provisioner/platform/secrets"
)

// MFATokenTTL is how long a sign-in may wait for its second factor.
const MFATokenTTL = 5 * time.Minute

// mfaChallenge is a row of auth_mfa_challenges: a sign-in whose first factor passed, waiting for
// the second. Only the token's hash is stored.
type mfaChallenge struct {
	bun.BaseModel `bun:"table:auth_mfa_challenges"`

	TokenHash []byte     `bun:"token_hash,pk"`
	UserID    int64      `bun:"user_id,notnull"`
	Provider  string     `bun:"provider,notnull"`
	Stamp     int64      `bun:"stamp,notnull"`
	ExpiresAt time.Time  `bun:"expires_at,notnull"`
	UsedAt    *time.Time `bun:"used_at"`
}

var (
	errBadMFAToken = fault.Unauthorized("Invalid or expired MFA token; sign in again")
	errBadMFACode  = fault.Unauthorized("Invalid code")
)

// beginSignIn signs u in through provider once its first factor passed (a password, a provider's
// callback): with TOTP on, a challenge whose mfaToken POST /api/auth/mfa completes; else a new
// session. details go to the audit event (user.login, or user.login.mfa_required).
func (s *Service) beginSignIn(ctx context.Context, u *User, provider string, c Client, details map[string]any) (*LoginResult, error) {
	if details == nil {
		details = map[string]any{}
	}
	details["provider"] = provider
	t, err := s.loadTOTP(ctx, s.db, u.ID)
	if err != nil {
		return nil, err
	}
	if t == nil || t.EnabledAt == nil {
		res, err := s.sessions.Start(ctx, u, provider, c, false)
		if err != nil {
			return nil, err
		}
		details["sessionId"] = res.SessionID
		s.audit.Try(ctx, audit.Event{Action: "user.login", ActorUserID: audit.Int64(u.ID), TargetType: "user",
			TargetID: fmt.Sprint(u.ID), Details: details})
		return &LoginResult{AuthResult: res}, nil
	}
	token := secrets.RandomToken(32)
	exp := time.Now().Add(MFATokenTTL).UTC().Truncate(time.Second)
	if _, err := s.db.NewInsert().Model(&mfaChallenge{TokenHash: tokenHash(token), UserID: u.ID, Provider: provider,
		Stamp: u.SecurityStamp, ExpiresAt: exp}).Exec(ctx); err != nil {
		return nil, fmt.Errorf("store mfa challenge: %w", err)
	}
	s.audit.Try(ctx, audit.Event{Action: "user.login.mfa_required", UserID: audit.Int64(u.ID), TargetType: "user",
		TargetID: fmt.Sprint(u.ID), Details: details})
	return &LoginResult{MFARequired: true, MFAToken: token, MFAExpiresAt: &exp}, nil
}

// CompleteMFA completes a sign-in that answered mfaRequired with a TOTP code or a recovery code:
// the challenge is spent and a session starts that has passed the second factor. A wrong code
// leaves the challenge for another try, within the lockout of the user's codes (429 past it).
func (s *Service) CompleteMFA(ctx context.Context, mfaToken, code string, c Client) (*AuthResult, error) {
	var ch mfaChallenge
	err := s.db.NewSelect().Model(&ch).Where("token_hash = ?", tokenHash(mfaToken)).Where("used_at IS NULL").
		Where("expires_at > now()").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errBadMFAToken
	}
	if err != nil {
		return nil, fmt.Errorf("find mfa challenge: %w", errors.Join(fault.ErrUnavailable, err))
	}
	u, err := s.liveUser(ctx, s.db, ch.UserID)
	if err != nil {
		return nil, err
	}
	if u == nil || u.SecurityStamp != ch.Stamp {
		return nil, errBadMFAToken
	}
	t, err := s.loadTOTP(ctx, s.db, u.ID)
	if err != nil {
		return nil, err
	}
	if t == nil || t.EnabledAt == nil {
		return nil, errBadMFAToken // turned off meanwhile: a new sign-in needs no second factor
	}
	attempt, err := s.lockout.Begin(ctx, mfaKey(u.ID))
	if err != nil {
		return nil, err
	}
	var method string
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewUpdate().Model((*mfaChallenge)(nil)).Set("used_at = now()").Where("token_hash = ?", ch.TokenHash).
			Where("used_at IS NULL").Exec(ctx)
		if err != nil {
			return fmt.Errorf("spend mfa challenge: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errBadMFAToken
		}
		if method, err = s.spendCode(ctx, tx, t, code, true); err == nil && method == "" {
			err = errCodeRefused
		}
		return err
	})
	if errors.Is(err, errCodeRefused) {
		s.audit.Try(ctx, audit.Event{Action: "user.login.failed", UserID: audit.Int64(u.ID), TargetType: "user",
			TargetID: fmt.Sprint(u.ID), Details: map[string]any{"provider": ch.Provider, "reason": "mfa", "failures": attempt.Failures}})
		return nil, errBadMFACode
	}
	if err != nil {
		return nil, err
	}
	attempt.Succeeded(ctx)
	res, err := s.sessions.Start(ctx, u, ch.Provider, c, true)
	if err != nil {
		return nil, err
	}
	res = s.sessions.withIdentity(ctx, res)
	s.audit.Try(ctx, audit.Event{Action: "user.login", ActorUserID: audit.Int64(u.ID), TargetType: "user",
		TargetID: fmt.Sprint(u.ID), Details: map[string]any{"provider": ch.Provider, "mfa": method, "sessionId": res.SessionID}})
	return res, nil
}
