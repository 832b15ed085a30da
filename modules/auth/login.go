package auth

import (
	"context"
	"errors"
	"fmt"

	"provisioner/platform/audit"
	"provisioner/platform/authn"
)

// LoginInput is what a password sign-in needs.
type LoginInput struct {
	Email, Password string
	Client          Client
}

// passwordKey is the lockout key of an account's password: the email as stored, whether or not an
// account has it, so the lockout answers known and unknown emails alike.
func passwordKey(email string) string { return "pw:" + email }

// Login signs in with email and password, in three steps:
//
//  1. Count: the lockout counts the attempt as failed before any hash runs, and refuses it (429
//     with Retry-After, the same for every email) while earlier failures hold attempts back.
//  2. Check: one password verification (checkPassword), the same work for an unknown email.
//  3. Answer: a wrong password is the 401 of every failure (the attempt stays counted); a right one
//     forgets the account's failures and signs in: a session, or, with TOTP on, the MFA step.
func (s *Service) Login(ctx context.Context, in LoginInput) (*LoginResult, error) {
	email, err := authn.ParseEmail(in.Email)
	if err != nil {
		return nil, err
	}
	attempt, err := s.lockout.Begin(ctx, passwordKey(email))
	if err != nil {
		return nil, err
	}
	u, err := s.checkPassword(ctx, email, in.Password)
	if err != nil {
		if errors.Is(err, errBadLogin) && attempt.Delay > 0 {
			s.audit.Try(ctx, audit.Event{Action: "user.login.locked", TargetType: "user", Details: map[string]any{
				"email": email, "failures": attempt.Failures, "delaySeconds": attempt.Delay.Seconds()}})
		}
		return nil, err
	}
	attempt.Succeeded(ctx)
	return s.beginSignIn(ctx, u, "Password", in.Client, nil)
}

// checkPassword is the one password check of a sign-in: the account of email when password is its
// password, else errBadLogin (audited as user.login.failed). An unknown email costs the same hash
// work as a wrong password (for the same input: see secrets.Hasher.VerifyPasswordDummy). A hash
// made before passwords were NFKC-normalised, from the text as typed, still signs in with that text
// and is then replaced by the hash of its NFKC form; a hash made with other argon2id parameters than
// the service's is made again with them at the sign-in (rehash).
func (s *Service) checkPassword(ctx context.Context, email, password string) (*User, error) {
	u, err := s.findByEmail(ctx, s.db, email)
	if err != nil {
		return nil, err
	}
	if u == nil || u.PasswordHash == nil {
		s.hasher.VerifyPasswordDummy(ctx, password)
		s.audit.Try(ctx, audit.Event{Action: "user.login.failed", TargetType: "user",
			Details: map[string]any{"email": email, "reason": "unknown"}})
		return nil, errBadLogin
	}
	ok, legacy, err := s.hasher.VerifyPassword(ctx, password, *u.PasswordHash)
	if err != nil {
		return nil, fmt.Errorf("verify password: %w", err)
	}
	if !ok {
		s.audit.Try(ctx, audit.Event{Action: "user.login.failed", UserID: audit.Int64(u.ID), TargetType: "user",
			TargetID: fmt.Sprint(u.ID), Details: map[string]any{"email": email, "reason": "password"}})
		return nil, errBadLogin
	}
	if legacy || s.hasher.NeedsRehash(*u.PasswordHash) {
		s.rehash(ctx, u, password)
	}
	return u, nil
}

// rehash replaces u's hash, just verified against password, by HashPassword's: a hash of the text
// as typed (made before passwords were normalised) becomes the hash of its NFKC form, and a hash
// made with other argon2id parameters than the service's (older, weaker ones) is made again with
// the service's. Only if the row still has the hash just verified: a reset meanwhile is never
// undone. The password is the same one, so the security stamp stays and no token dies. A failure
// is logged and the sign-in goes on: the old hash still works, and the next one tries again.
func (s *Service) rehash(ctx context.Context, u *User, password string) {
	hash, err := s.hasher.HashPassword(ctx, password)
	if err == nil {
		_, err = s.db.NewUpdate().Model((*User)(nil)).Set("password_hash = ?", hash).Set("updated_at = now()").
			Where("id = ?", u.ID).Where("password_hash = ?", *u.PasswordHash).Where("deleted_at IS NULL").Exec(ctx)
	}
	if err != nil {
		s.log.WarnContext(ctx, "password hash not upgraded", "userId", u.ID, "error", err.Error())
	}
}
