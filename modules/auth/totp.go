package auth

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/hotp"
	"github.com/pquerna/otp/totp"
	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/authn"
	"provisioner/platform/db"
	"provisioner/platform/fault"
)

// TOTP parameters (RFC 6238's defaults, the ones every authenticator app takes): HMAC-SHA1, six
// digits, 30-second steps; a code of the step before or after the current one is accepted too.
const (
	totpPeriod        = 30
	totpDigits        = otp.DigitsSix
	recoveryCodeCount = 10
)

// userTOTP is a row of user_totp.
type userTOTP struct {
	bun.BaseModel `bun:"table:user_totp"`

	UserID       int64      `bun:"user_id,pk"`
	SecretSealed string     `bun:"secret_sealed,notnull"`
	EnabledAt    *time.Time `bun:"enabled_at"`
	LastStep     int64      `bun:"last_step,notnull"`
	CreatedAt    time.Time  `bun:"created_at,nullzero,notnull,default:current_timestamp"`
}

// TOTPEnrolment is a new TOTP secret, shown once.
type TOTPEnrolment struct {
	Secret     string `json:"secret" example:"JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP" doc:"The secret in base32, for an app that cannot scan otpauthUri. Shown once."`
	OtpauthURI string `json:"otpauthUri" doc:"The otpauth:// URI (Key Uri Format), to show as a QR code."`
	Algorithm  string `json:"algorithm" enum:"SHA1" example:"SHA1"`
	Digits     int    `json:"digits" example:"6"`
	Period     int    `json:"period" example:"30" doc:"Seconds per code."`
}

// RecoveryCodes are the single-use codes made when TOTP is turned on, shown once.
type RecoveryCodes struct {
	RecoveryCodes []string `json:"recoveryCodes" doc:"Ten single-use codes, each accepted once wherever a TOTP code is. Shown once."`
}

// Errors of the second factor.
var (
	errTOTPOn      = fault.Conflict("TOTP is already on; turn it off first (DELETE /api/me/mfa/totp)")
	errTOTPOff     = fault.Conflict("TOTP is not on")
	errNoEnrolment = fault.Conflict("No TOTP enrolment is in progress: start one with POST /api/me/mfa/totp")
	// errEnrolmentRestarted: the enrolment was started again while a code of its former secret was checked.
	errEnrolmentRestarted = fault.Conflict("The TOTP enrolment was started again meanwhile: verify with a code of its new secret")
	errWrongCode          = fault.InvalidField("code", "is not a valid code: a current code of the authenticator app, not used before, or an unused recovery code")
	// errCodeRefused makes a transaction that checked a wrong code roll back.
	errCodeRefused = errors.New("code refused")
)

func totpAAD(userID int64) string { return "totp:" + strconv.FormatInt(userID, 10) }

// mfaKey is the lockout key of a user's second factor.
func mfaKey(userID int64) string { return "mfa:" + strconv.FormatInt(userID, 10) }

// loadTOTP is the TOTP row of userID, or nil.
func (s *Service) loadTOTP(ctx context.Context, d bun.IDB, userID int64) (*userTOTP, error) {
	t := new(userTOTP)
	err := d.NewSelect().Model(t).Where("user_id = ?", userID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load totp: %w", errors.Join(fault.ErrUnavailable, err))
	}
	return t, nil
}

// StartTOTP begins (or begins again) the principal's TOTP enrolment: a new secret, stored sealed,
// not in force until ConfirmTOTP. With TOTP already on it is a 409.
func (s *Service) StartTOTP(ctx context.Context, p *authn.Principal) (*TOTPEnrolment, error) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: s.own.TotpIssuer, AccountName: p.Email,
		Period: totpPeriod, SecretSize: 20, Digits: totpDigits, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		return nil, fmt.Errorf("generate totp secret: %w", err)
	}
	sealed, err := s.sealer.Seal([]byte(key.Secret()), totpAAD(p.UserID))
	if err != nil {
		return nil, err
	}
	err = db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		res, err := tx.NewInsert().Model(&userTOTP{UserID: p.UserID, SecretSealed: sealed}).
			On("CONFLICT (user_id) DO UPDATE").Set("secret_sealed = EXCLUDED.secret_sealed").Set("last_step = 0").
			Set("created_at = now()").Where("user_totp.enabled_at IS NULL").Exec(ctx)
		if err != nil {
			return fmt.Errorf("store totp secret: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return errTOTPOn
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.mfa.totp.enrolment_started", TargetType: "user",
			TargetID: fmt.Sprint(p.UserID)})
	})
	if err != nil {
		return nil, err
	}
	return &TOTPEnrolment{Secret: key.Secret(), OtpauthURI: key.URL(), Algorithm: "SHA1", Digits: totpDigits.Length(), Period: totpPeriod}, nil
}

// ConfirmTOTP turns the principal's TOTP on with a code of the enrolment's secret, and answers ten
// new recovery codes (earlier ones are dropped). The session passes the second factor with it.
func (s *Service) ConfirmTOTP(ctx context.Context, p *authn.Principal, code string) (*RecoveryCodes, error) {
	t, err := s.loadTOTP(ctx, s.db, p.UserID)
	switch {
	case err != nil:
		return nil, err
	case t == nil:
		return nil, errNoEnrolment
	case t.EnabledAt != nil:
		return nil, errTOTPOn
	}
	codes, hashes := newRecoveryCodes()
	err = s.withCode(ctx, p.UserID, "enable", func(ctx context.Context, tx bun.Tx) error {
		if method, err := s.spendCode(ctx, tx, t, code, false); err != nil || method == "" {
			return cmp.Or(err, errCodeRefused)
		}
		// Only the secret the code was checked against: an enrolment started again meanwhile (another
		// tab) stored another one.
		res, err := tx.NewUpdate().Model((*userTOTP)(nil)).Set("enabled_at = now()").Where("user_id = ?", p.UserID).
			Where("enabled_at IS NULL").Where("secret_sealed = ?", t.SecretSealed).Exec(ctx)
		if err != nil {
			return fmt.Errorf("turn totp on: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			now, err := s.loadTOTP(ctx, tx, p.UserID)
			switch {
			case err != nil:
				return err
			case now == nil:
				return errNoEnrolment
			case now.EnabledAt == nil:
				return errEnrolmentRestarted
			}
			return errTOTPOn
		}
		if err := s.replaceRecoveryCodes(ctx, tx, p.UserID, hashes); err != nil {
			return err
		}
		if _, err := s.sessions.passedMFA(ctx, tx, p.SessionID); err != nil {
			return err
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.mfa.totp.enabled", TargetType: "user",
			TargetID: fmt.Sprint(p.UserID), Details: map[string]any{"recoveryCodes": recoveryCodeCount}})
	})
	if err != nil {
		return nil, err
	}
	return &RecoveryCodes{RecoveryCodes: codes}, nil
}

// DisableTOTP turns the principal's TOTP off with a current code or a recovery code; the secret
// and the recovery codes are deleted.
func (s *Service) DisableTOTP(ctx context.Context, p *authn.Principal, code string) error {
	t, err := s.enabledTOTP(ctx, p.UserID)
	if err != nil {
		return err
	}
	return s.withCode(ctx, p.UserID, "disable", func(ctx context.Context, tx bun.Tx) error {
		method, err := s.spendCode(ctx, tx, t, code, true)
		if err != nil || method == "" {
			return cmp.Or(err, errCodeRefused)
		}
		if _, err := tx.NewDelete().Model((*recoveryCode)(nil)).Where("user_id = ?", p.UserID).Exec(ctx); err != nil {
			return fmt.Errorf("drop recovery codes: %w", err)
		}
		if _, err := tx.NewDelete().Model((*userTOTP)(nil)).Where("user_id = ?", p.UserID).Exec(ctx); err != nil {
			return fmt.Errorf("turn totp off: %w", err)
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.mfa.totp.disabled", TargetType: "user",
			TargetID: fmt.Sprint(p.UserID), Details: map[string]any{"method": method}})
	})
}

// StepUp records that the principal's session passed the second factor now (a current code or a
// recovery code), for the operations that ask for a recent one (authn.RequireStepUp).
func (s *Service) StepUp(ctx context.Context, p *authn.Principal, code string) (time.Time, error) {
	t, err := s.enabledTOTP(ctx, p.UserID)
	if err != nil {
		return time.Time{}, err
	}
	var at time.Time
	err = s.withCode(ctx, p.UserID, "step-up", func(ctx context.Context, tx bun.Tx) error {
		method, err := s.spendCode(ctx, tx, t, code, true)
		if err != nil || method == "" {
			return cmp.Or(err, errCodeRefused)
		}
		if at, err = s.sessions.passedMFA(ctx, tx, p.SessionID); err != nil {
			return err
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.mfa.step_up", TargetType: "user",
			TargetID: fmt.Sprint(p.UserID), Details: map[string]any{"method": method, "sessionId": p.SessionID}})
	})
	return at, err
}

func (s *Service) enabledTOTP(ctx context.Context, userID int64) (*userTOTP, error) {
	t, err := s.loadTOTP(ctx, s.db, userID)
	if err == nil && (t == nil || t.EnabledAt == nil) {
		return nil, errTOTPOff
	}
	return t, err
}

// withCode runs fn, which checks a code of userID's second factor, behind the lockout: the attempt
// is counted before, forgotten when fn commits; a code fn refused is audited (user.mfa.failed) and
// answered errWrongCode.
func (s *Service) withCode(ctx context.Context, userID int64, purpose string, fn func(context.Context, bun.Tx) error) error {
	attempt, err := s.lockout.Begin(ctx, mfaKey(userID))
	if err != nil {
		return err
	}
	err = db.RunInTx(ctx, s.db, fn)
	if errors.Is(err, errCodeRefused) {
		s.audit.Try(ctx, audit.Event{Action: "user.mfa.failed", TargetType: "user", TargetID: fmt.Sprint(userID),
			Details: map[string]any{"purpose": purpose, "failures": attempt.Failures}})
		return errWrongCode
	}
	if err != nil {
		return err
	}
	attempt.Succeeded(ctx)
	return nil
}

// spendCode checks code against t within tx and spends it: a TOTP code of the current time step
// or one next to it, newer than the last accepted (the step is recorded, so a code is accepted
// once), or, with recovery, an unused recovery code (marked used). It answers how the code passed
// ("totp", "recovery"), or "" when it did not.
func (s *Service) spendCode(ctx context.Context, tx bun.IDB, t *userTOTP, code string, recovery bool) (string, error) {
	code = strings.TrimSpace(code)
	if len(code) == totpDigits.Length() && strings.Trim(code, "0123456789") == "" {
		secret, err := s.sealer.Open(t.SecretSealed, totpAAD(t.UserID))
		if err != nil {
			return "", fmt.Errorf("open totp secret: %w", err)
		}
		step, ok := matchStep(string(secret), code, time.Now())
		if !ok || step <= t.LastStep {
			return "", nil
		}
		res, err := tx.NewUpdate().Model((*userTOTP)(nil)).Set("last_step = ?", step).Where("user_id = ?", t.UserID).
			Where("last_step < ?", step).Exec(ctx)
		if err != nil {
			return "", fmt.Errorf("spend totp code: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return "totp", nil
		}
		return "", nil
	}
	if !recovery {
		return "", nil
	}
	res, err := tx.NewUpdate().Model((*recoveryCode)(nil)).Set("used_at = now()").Where("user_id = ?", t.UserID).
		Where("code_hash = ?", recoveryHash(code)).Where("used_at IS NULL").Exec(ctx)
	if err != nil {
		return "", fmt.Errorf("spend recovery code: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return "recovery", nil
	}
	return "", nil
}

// matchStep is the time step (of the current one and the two next to it) whose code is code.
func matchStep(secret, code string, now time.Time) (int64, bool) {
	cur := now.Unix() / totpPeriod
	for _, step := range []int64{cur, cur - 1, cur + 1} {
		ok, err := hotp.ValidateCustom(code, uint64(step), secret, hotp.ValidateOpts{Digits: totpDigits, Algorithm: otp.AlgorithmSHA1})
		if err == nil && ok {
			return step, true
		}
	}
	return 0, false
}

// recoveryCode is a row of user_recovery_codes.
type recoveryCode struct {
	bun.BaseModel `bun:"table:user_recovery_codes"`

	ID       int64      `bun:"id,pk,autoincrement"`
	UserID   int64      `bun:"user_id,notnull"`
	CodeHash []byte     `bun:"code_hash,notnull"`
	UsedAt   *time.Time `bun:"used_at"`
}

var recoveryEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newRecoveryCodes makes the recovery codes and their hashes.
func newRecoveryCodes() ([]string, [][]byte) {
	codes := make([]string, recoveryCodeCount)
	hashes := make([][]byte, recoveryCodeCount)
	for i := range codes {
		var b [10]byte
		_, _ = rand.Read(b[:])
		s := recoveryEncoding.EncodeToString(b[:])
		codes[i] = s[0:4] + "-" + s[4:8] + "-" + s[8:12] + "-" + s[12:16]
		hashes[i] = recoveryHash(codes[i])
	}
	return codes, hashes
}

// recoveryHash is the SHA-256 of a recovery code as typed, without case, dashes or spaces.
func recoveryHash(code string) []byte {
	norm := strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, strings.ToLower(strings.TrimSpace(code)))
	sum := sha256.Sum256([]byte(norm))
	return sum[:]
}

func (s *Service) replaceRecoveryCodes(ctx context.Context, tx bun.Tx, userID int64, hashes [][]byte) error {
	if _, err := tx.NewDelete().Model((*recoveryCode)(nil)).Where("user_id = ?", userID).Exec(ctx); err != nil {
		return fmt.Errorf("drop recovery codes: %w", err)
	}
	rows := make([]recoveryCode, len(hashes))
	for i, h := range hashes {
		rows[i] = recoveryCode{UserID: userID, CodeHash: h}
	}
	if _, err := tx.NewInsert().Model(&rows).Exec(ctx); err != nil {
		return fmt.Errorf("store recovery codes: %w", err)
	}
	return nil
}
