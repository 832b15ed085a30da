package auth

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/authn"
	"provisioner/platform/coherent"
	"provisioner/platform/config"
	"provisioner/platform/db"
	"provisioner/platform/emailaddr"
	"provisioner/platform/fault"
	"provisioner/platform/mail"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// ResetTokenTTL is how long a password reset token stays valid.
const ResetTokenTTL = 30 * time.Minute

// Service implements sign-in: registration, login (password, then TOTP when on), password
// recovery, and the second factor's enrolment.
type Service struct {
	db       *bun.DB
	cfg      *config.Config
	own      AuthSettings // Auth:*
	hasher   *secrets.Hasher
	sealer   *secrets.Sealer
	sessions *Sessions
	lockout  *Lockout
	audit    *audit.Recorder
	mailer   mail.Sender
	newUser  provision.NewUserHook // nil when no module gives new users a resource
	// revokers revoke, in a reset's transaction, what an account taken over by the reset handed
	// out (see ResetPassword).
	revokers []provision.TakeoverRevoker
	log      *slog.Logger

	// recovery counts forgot-password's background work; recoverySlots bounds it.
	recovery      sync.WaitGroup
	recoverySlots chan struct{}
}

// Errors a caller may match.
var (
	errEmailTaken   = fault.Conflict("An account with this email already exists")
	errBadLogin     = fault.Unauthorized("Invalid email or password")
	errBadResetCode = fault.Invalid("Invalid or expired reset token",
		fault.FieldError{Field: "token", Message: "is invalid, expired or already used"})
)

// RegisterInput is what registration needs.
type RegisterInput struct {
	FullName, Organization, Email, Password string
	Client                                  Client
}

// Register creates a local account, gives it its tenant database (never failing because of the
// engine) and signs it in.
func (s *Service) Register(ctx context.Context, in RegisterInput) (*RegisterResult, error) {
	email, err := authn.NewAccount(in.FullName, in.Email, in.Password)
	if err != nil {
		return nil, err
	}
	hash, err := s.hasher.HashPassword(ctx, in.Password)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	u := &User{Account: db.Account{
		Email: email, FullName: strings.TrimSpace(in.FullName), Organization: strings.TrimSpace(in.Organization),
		Role: authn.RoleUser, PasswordHash: &hash, SecurityStamp: 1,
	}}
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(u).Returning("?Columns").Exec(ctx); err != nil {
			if db.IsUniqueViolation(err) {
				return errEmailTaken
			}
			return fmt.Errorf("insert user: %w", err)
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{
			Action: "user.registered", ActorUserID: audit.Int64(u.ID), TargetType: "user",
			TargetID: fmt.Sprint(u.ID), Details: map[string]any{"email": u.Email, "provider": "Password"},
		})
	})
	if err != nil {
		return nil, err
	}
	res, err := s.sessions.Start(ctx, u, "Password", in.Client, false)
	if err != nil {
		return nil, err
	}
	out := &RegisterResult{AuthResult: *res}
	out.TenantDatabase = s.ProvisionFirstResource(ctx, u)
	return out, nil
}

// ProvisionFirstResource runs the new-user hook; its failure is logged, never returned: the
// account exists and the background finisher completes what the hook left in flight.
func (s *Service) ProvisionFirstResource(ctx context.Context, u *User) any {
	if s.newUser == nil {
		return nil
	}
	pctx := authn.WithPrincipal(ctx, &authn.Principal{UserID: u.ID, Email: u.Email, Name: u.FullName, Role: u.Role})
	res, err := s.newUser.OnUserCreated(pctx, provision.NewUser{
		UserID: u.ID, Email: u.Email, FullName: u.FullName, Organization: u.Organization,
	})
	if err != nil {
		s.log.WarnContext(ctx, "first resource not provisioned at registration", "userId", u.ID, "error", err.Error())
	}
	return res
}

// MaxRecoveryInFlight bounds the reset mails being prepared and sent at once (forgot-password's
// background work). Past it a request still gets its 200, and no mail: asking again later works.
const MaxRecoveryInFlight = 64

// ForgotPassword mails a single-use link to a known account ("set a password" to one without);
// nothing when send is false (the email's reset budget is spent). Its answer and timing do not tell
// whether the account exists: the token, the audit event and the mail are made in the background
// (at most MaxRecoveryInFlight, waited for at shutdown).
func (s *Service) ForgotPassword(ctx context.Context, email string, send bool) error {
	email, err := authn.ParseEmail(email)
	if err != nil {
		return err
	}
	u, err := s.findByEmail(ctx, s.db, email)
	if err != nil {
		return err
	}
	if u == nil || !send {
		return nil
	}
	select {
	case s.recoverySlots <- struct{}{}:
	default:
		s.log.WarnContext(ctx, "password reset mail dropped: too many in flight", "userId", u.ID)
		return nil
	}
	s.recovery.Add(1)
	// The request's values (request id, client IP for the audit) without its cancellation, and a
	// write marker of its own: the request must not wait for a Sync of this work either.
	bctx, _ := coherent.WithWriteMarker(context.WithoutCancel(ctx))
	go func() {
		defer func() { <-s.recoverySlots; s.recovery.Done() }()
		bctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := s.sendResetLink(bctx, u); err != nil {
			s.log.ErrorContext(bctx, "password reset mail not sent", "userId", u.ID, "error", err.Error())
		}
	}()
	return nil
}

// sendResetLink stores a new reset token of u, audits the request and mails the link.
func (s *Service) sendResetLink(ctx context.Context, u *User) error {
	token := secrets.RandomToken(32)
	sum := sha256.Sum256([]byte(token))
	rt := &resetToken{UserID: u.ID, TokenHash: sum[:], Email: u.Email, ExpiresAt: time.Now().Add(ResetTokenTTL)}
	if _, err := s.db.NewInsert().Model(rt).Exec(ctx); err != nil {
		return fmt.Errorf("store reset token: %w", err)
	}
	s.audit.Try(ctx, audit.Event{Action: "user.password.reset_requested", UserID: audit.Int64(u.ID),
		TargetType: "user", TargetID: fmt.Sprint(u.ID), Details: map[string]any{"hasPassword": u.PasswordHash != nil}})
	link := strings.TrimRight(s.cfg.Frontend.BaseUrl, "/") + "/auth/reset-password#token=" + url.QueryEscape(token)
	return s.mailer.Send(ctx, resetMail(u, link))
}

// WaitRecovery waits until the background reset mails are done, or ctx ends.
func (s *Service) WaitRecovery(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.recovery.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// resetMail is the message carrying a reset link: to choose a new password, or, for an account
// without one, to set its first.
func resetMail(u *User, link string) mail.Message {
	if u.PasswordHash == nil {
		return mail.Message{
			To:      u.Email,
			Subject: "Set a password for your account",
			Text: "Someone asked to reset the password of the account with this email address. The account has no " +
				"password yet: it signs in through GitHub or Google.\n\n" +
				"Open this link within 30 minutes to set a password for the account:\n" + link +
				"\n\nSetting it proves that this mailbox owns the account: every session signed in before ends, and " +
				"any GitHub or Google sign-in whose email the provider had not verified, or whose email is not this " +
				"address, is unlinked from the account.\n\n" +
				"If it was not you, ignore this message; the account stays as it is.\n",
		}
	}
	return mail.Message{
		To:      u.Email,
		Subject: "Reset your password",
		Text: "Someone asked to reset the password of your account.\n\n" +
			"Open this link within 30 minutes to choose a new password:\n" + link +
			"\n\nIf it was not you, ignore this message; your password stays as it is.\n",
	}
}

// ResetOutcome says what a completed reset did beyond setting the password.
type ResetOutcome struct {
	// TakenOver: the reset proved an email the account had not proven, or unlinked identities,
	// so whoever made the account may not be its owner: what it handed out was revoked.
	TakenOver bool
	// Revoked is what the revokers reported (e.g. aiKeys: the ids of the revoked keys).
	Revoked map[string]any

	userID int64
}

// ResetPassword spends the token and every other reset token of the account, sets the password,
// ends every earlier access token (the security stamp) and proves the account's email; a link mailed
// to an address the account no longer has resets nothing. In the same transaction it unlinks provider
// identities that do not prove this mailbox (audited user.identity.unlinked) and, when that takes the
// account over, runs the TakeoverRevokers (AI keys revoked, new database owner passwords stored);
// after the commit the TakeoverFollowers apply what they stored, before the answer.
func (s *Service) ResetPassword(ctx context.Context, token, newPassword string) (*ResetOutcome, error) {
	if msg := secrets.PasswordProblem(newPassword); msg != "" {
		return nil, fault.Invalid("Validation failed", fault.FieldError{Field: "newPassword", Message: msg})
	}
	sum := sha256.Sum256([]byte(token))
	// An unknown, expired or spent token, or one mailed to an address the account no longer has,
	// costs no hash (a hash takes a slot login needs): it is refused before. The transaction
	// below checks it again while spending it, so a token spent meanwhile still resets nothing.
	live, err := s.db.NewSelect().TableExpr("password_reset_tokens AS rt").
		Join("JOIN users AS u ON u.id = rt.user_id AND u.email = rt.email AND u.deleted_at IS NULL").
		Where("rt.token_hash = ?", sum[:]).Where("rt.used_at IS NULL").Where("rt.expires_at > now()").Exists(ctx)
	if err != nil {
		return nil, fmt.Errorf("find reset token: %w", errors.Join(fault.ErrUnavailable, err))
	}
	if !live {
		return nil, errBadResetCode
	}
	hash, err := s.hasher.HashPassword(ctx, newPassword)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	out := &ResetOutcome{}
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		*out = ResetOutcome{}
		var rt resetToken
		err := tx.NewSelect().Model(&rt).Column("user_id", "email").Where("token_hash = ?", sum[:]).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return errBadResetCode
		}
		if err != nil {
			return fmt.Errorf("find reset token: %w", err)
		}
		// The account's row is locked before any of its links, as every other writer locks them (a
		// change of the email, whose trigger spends the links; another reset): a reset that spent
		// its own link first and then waited for the row deadlocked with one that held the row and
		// was spending the account's links (two links used at once: one answered 503).
		// Whether the email was proven before this reset is read under that lock, so two resets of
		// one account cannot both see it unproven, nor both miss it.
		var wasProven bool
		err = tx.NewSelect().Model((*User)(nil)).ColumnExpr("email_verified_at IS NOT NULL").
			Where("id = ?", rt.UserID).Where("email = ?", rt.Email).Where("deleted_at IS NULL").For("UPDATE").
			Scan(ctx, &wasProven)
		if errors.Is(err, sql.ErrNoRows) {
			return errBadResetCode
		}
		if err != nil {
			return fmt.Errorf("lock user: %w", err)
		}
		// Spent under the lock: a reset that held it meanwhile spent this link too (400 then).
		res, err := tx.NewUpdate().Model((*resetToken)(nil)).Set("used_at = now()").
			Where("token_hash = ?", sum[:]).Where("used_at IS NULL").Where("expires_at > now()").Exec(ctx)
		if err != nil {
			return fmt.Errorf("spend reset token: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errBadResetCode
		}
		if _, err := tx.NewUpdate().Model((*User)(nil)).
			Set("password_hash = ?", hash).Set("security_stamp = security_stamp + 1").Set("updated_at = now()").
			Set("email_verified_at = now()").Where("id = ?", rt.UserID).Exec(ctx); err != nil {
			return fmt.Errorf("set password: %w", err)
		}
		unlinked, err := s.unlinkUnproven(ctx, tx, rt.UserID, rt.Email)
		if err != nil {
			return err
		}
		// Every other outstanding link of the account dies with this reset: one mailed earlier
		// (perhaps to an attacker who asked for it) must not undo the new password.
		if _, err := tx.NewUpdate().Model((*resetToken)(nil)).Set("used_at = now()").
			Where("user_id = ?", rt.UserID).Where("used_at IS NULL").Exec(ctx); err != nil {
			return fmt.Errorf("spend the other reset tokens: %w", err)
		}
		var details map[string]any
		if !wasProven || unlinked > 0 {
			out.TakenOver, out.Revoked = true, map[string]any{}
			for _, r := range s.revokers {
				got, err := r.RevokeOnTakeover(ctx, tx, rt.UserID)
				if err != nil {
					return fmt.Errorf("revoke what the account handed out: %w", err)
				}
				for k, v := range got {
					out.Revoked[k] = v
				}
			}
			details = map[string]any{"takeover": true, "reason": takeoverReason(wasProven, unlinked), "revoked": out.Revoked}
		}
		out.userID = rt.UserID
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.password.reset", ActorUserID: audit.Int64(rt.UserID),
			TargetType: "user", TargetID: fmt.Sprint(rt.UserID), Details: details})
	})
	if err != nil {
		return nil, err
	}
	if out.TakenOver {
		for _, r := range s.revokers {
			if f, ok := r.(provision.TakeoverFollower); ok {
				f.FollowTakeover(ctx, out.userID)
			}
		}
	}
	return out, nil
}

func takeoverReason(wasProven bool, unlinked int) string {
	if !wasProven {
		return "the reset proved an email the account had not proven"
	}
	return "the reset unlinked identities that did not prove the email"
}

// unlinkUnproven deletes the identities of the account that do not vouch for email, the address a
// reset link just reached: unverified by their provider when linked, or for another address.
func (s *Service) unlinkUnproven(ctx context.Context, tx bun.Tx, userID int64, email string) (int, error) {
	var gone []identity
	if err := tx.NewDelete().Model(&gone).Where("user_id = ?", userID).
		Where("(NOT email_verified OR lower(email) <> lower(?))", email).Returning("provider, provider_user_id, email, email_verified").
		Scan(ctx); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("unlink unproven identities: %w", err)
	}
	if len(gone) == 0 {
		return 0, nil
	}
	providers := make([]string, 0, len(gone))
	identities := make([]map[string]any, 0, len(gone))
	for _, i := range gone {
		providers = append(providers, providerDisplay(i.Provider))
		identities = append(identities, map[string]any{"provider": providerDisplay(i.Provider),
			"providerUserId": i.ProviderUserID, "email": i.Email, "emailVerified": i.EmailVerified})
	}
	return len(gone), s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.identity.unlinked", UserID: audit.Int64(userID),
		TargetType: "user", TargetID: fmt.Sprint(userID), Details: map[string]any{"providers": providers,
			"identities": identities, "reason": "password reset proved the email"}})
}

// Me returns the principal's account. One deleted while the request was in flight is the 401 of
// a token whose subject is gone (authn.UserGone).
func (s *Service) Me(ctx context.Context, id int64) (*UserView, error) {
	u := new(User)
	err := s.db.NewSelect().Model(u).Where("id = ?", id).Where("deleted_at IS NULL").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, authn.UserGone(ctx, id)
	}
	if err != nil {
		return nil, fmt.Errorf("load user: %w", err)
	}
	v := viewOf(u, "", "")
	if u.PasswordHash == nil {
		// An account that only signs in through a provider reports that identity.
		var id identity
		if err := s.db.NewSelect().Model(&id).Where("user_id = ?", u.ID).OrderExpr("id").Limit(1).Scan(ctx); err == nil {
			v.Provider = providerDisplay(id.Provider)
			v.ProviderUserID = id.ProviderUserID
		}
	}
	return &v, nil
}

// EnsureBootstrapAdmin makes sure Bootstrap:AdminEmail is an Admin (CONTRACT §3): created with
// Bootstrap:AdminPassword if missing, promoted if not Admin (an existing password is left alone).
// One exception while the service has another live Admin: an account an Admin deleted, or demoted
// (its user.role.changed event from Admin), stays so: a restart must not undo that with the
// password from the configuration. One WARN line says why it was skipped. Once no Admin is left at
// all, it is created or promoted again.
func (s *Service) EnsureBootstrapAdmin(ctx context.Context) error {
	if strings.TrimSpace(s.cfg.Bootstrap.AdminEmail) == "" {
		return nil
	}
	email, err := emailaddr.Normalize(s.cfg.Bootstrap.AdminEmail)
	if err != nil {
		return &config.ValidationError{Key: "Bootstrap:AdminEmail", Reason: emailaddr.Message}
	}
	u, err := s.findByEmail(ctx, s.db, email)
	if err != nil {
		return err
	}
	if u != nil && u.Role == authn.RoleAdmin {
		return nil
	}
	admins, err := s.db.NewSelect().Model((*User)(nil)).Where("role = ?", authn.RoleAdmin).Where("deleted_at IS NULL").Count(ctx)
	if err != nil {
		return fmt.Errorf("count admins: %w", err)
	}
	if admins > 0 {
		// Other Admins exist: the contract's "created if missing, promoted if not Admin" holds,
		// except for an account an Admin deliberately deleted or demoted, which stays so (a
		// restart would otherwise bring back, with the configured password, an admin removed
		// because that password leaked).
		reason := ""
		if u == nil {
			deleted, err := s.db.NewSelect().Model((*User)(nil)).Where("lower(email) = ?", email).
				Where("deleted_at IS NOT NULL").Exists(ctx)
			if err != nil {
				return fmt.Errorf("find deleted bootstrap admin: %w", err)
			}
			if deleted {
				reason = "the account was deleted; it is created again only when the service has no Admin"
			}
		} else {
			demoted, err := s.db.NewSelect().Table("audit_events").Where("action = 'user.role.changed'").
				Where("target_id = ?", fmt.Sprint(u.ID)).Where("details->>'from' = ?", authn.RoleAdmin).Exists(ctx)
			if err != nil {
				return fmt.Errorf("find demotion of bootstrap admin: %w", err)
			}
			if demoted {
				reason = "the account has role " + u.Role + " (demoted); it is promoted again only when the service has no Admin"
			}
		}
		if reason != "" {
			s.log.WarnContext(ctx, "bootstrap admin skipped: other Admins exist", "email", email, "admins", admins, "reason", reason)
			return nil
		}
	}
	if u != nil {
		_, err := s.db.NewUpdate().Model((*User)(nil)).Set("role = ?", authn.RoleAdmin).Set("updated_at = now()").
			Where("id = ?", u.ID).Exec(ctx)
		if err == nil {
			s.audit.Try(ctx, audit.Event{Action: "user.role.changed", UserID: audit.Int64(u.ID), TargetType: "user",
				TargetID: fmt.Sprint(u.ID), Details: map[string]any{"from": u.Role, "to": authn.RoleAdmin, "by": "bootstrap"}})
			s.log.InfoContext(ctx, "bootstrap admin promoted", "email", email)
		}
		return err
	}
	if s.cfg.Bootstrap.AdminPassword == "" {
		return &config.ValidationError{Key: "Bootstrap:AdminPassword", Reason: "is required to create the bootstrap admin"}
	}
	hash, err := s.hasher.HashPassword(ctx, s.cfg.Bootstrap.AdminPassword)
	if err != nil {
		return err
	}
	u = &User{Account: db.Account{Email: email, FullName: "Administrator", Role: authn.RoleAdmin, PasswordHash: &hash, SecurityStamp: 1}}
	if _, err := s.db.NewInsert().Model(u).Returning("?Columns").Exec(ctx); err != nil {
		if db.IsUniqueViolation(err) {
			return nil // another replica created it
		}
		return fmt.Errorf("create bootstrap admin: %w", err)
	}
	s.audit.Try(ctx, audit.Event{Action: "user.created", UserID: audit.Int64(u.ID), TargetType: "user",
		TargetID: fmt.Sprint(u.ID), Details: map[string]any{"email": email, "role": authn.RoleAdmin, "by": "bootstrap"}})
	s.log.Info("bootstrap admin created", "email", email)
	return nil
}

func (s *Service) findByEmail(ctx context.Context, db bun.IDB, email string) (*User, error) {
	u := new(User)
	err := db.NewSelect().Model(u).Where("lower(email) = ?", email).Where("deleted_at IS NULL").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find user: %w", errors.Join(fault.ErrUnavailable, err))
	}
	return u, nil
}

// normalizeEmail is the rate-limit key of an email: the address as stored, so that every spelling
// of one mailbox (case, fullwidth letters, IDNA forms) spends one allowance; an email that is not
// a bare address (refused later with a 400) is trimmed and lower-cased.
func normalizeEmail(s string) string {
	if email, err := emailaddr.Normalize(s); err == nil {
		return email
	}
	return strings.ToLower(strings.TrimSpace(s))
}
