package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/authn"
	"provisioner/platform/coherent"
	"provisioner/platform/config"
	"provisioner/platform/fault"
	"provisioner/platform/secrets"
)

// Sessions keeps the sign-in sessions: access tokens carry the session's id (claim sid); a refresh
// token is single use, its successor derived from it by HMAC, so only hashes are stored and a spent
// token presented within Auth:RefreshReuseSeconds gets the same successor, later ends the session.
// The guard asks Sessions (authn.Sessions) through a cache kept coherent on every replica.
type Sessions struct {
	db     *bun.DB
	tokens *authn.Tokens
	audit  *audit.Recorder
	cfg    AuthSettings
	key    []byte // derives a refresh token's successor
	cache  *coherent.Cache[int64, sessionState]
}

// sessionState is what the session cache keeps of a session (one per user signed in): the
// authn.Session in 24 bytes, the second factor's time as Unix nanoseconds (0: never).
type sessionState struct {
	userID, mfaAt int64
	live, mfaOn   bool
}

func (st sessionState) session() authn.Session {
	out := authn.Session{UserID: st.userID, Live: st.live, MFAOn: st.mfaOn}
	if st.mfaAt != 0 {
		out.MFAAt = time.Unix(0, st.mfaAt)
	}
	return out
}

// NewSessions builds the sessions; bus may be nil (no cache).
func NewSessions(d *bun.DB, tokens *authn.Tokens, a *audit.Recorder, bus *coherent.Bus, platform *config.Config, cfg Config) *Sessions {
	mac := hmac.New(sha256.New, []byte(platform.Jwt.Key))
	mac.Write([]byte("refresh-token-successor"))
	return &Sessions{db: d, tokens: tokens, audit: a, cfg: cfg.Auth, key: mac.Sum(nil),
		cache: coherent.NewCache(bus, coherent.CacheOptions[int64, sessionState]{
			Table: "auth_sessions", Also: []string{"user_totp"},
			Tag: func(_ int64, s sessionState) string { return strconv.FormatInt(s.userID, 10) },
		})}
}

// session is a row of auth_sessions.
type session struct {
	bun.BaseModel `bun:"table:auth_sessions"`

	ID            int64      `bun:"id,pk,autoincrement"`
	UserID        int64      `bun:"user_id,notnull"`
	Provider      string     `bun:"provider,notnull"`
	IP            string     `bun:"ip,notnull"`
	UserAgent     string     `bun:"user_agent,notnull"`
	Stamp         int64      `bun:"stamp,notnull"`
	Role          string     `bun:"role,notnull"`
	MFAAt         *time.Time `bun:"mfa_at"`
	CreatedAt     time.Time  `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	LastUsedAt    time.Time  `bun:"last_used_at,nullzero,notnull,default:current_timestamp"`
	ExpiresAt     time.Time  `bun:"expires_at,notnull"`
	RevokedAt     *time.Time `bun:"revoked_at"`
	RevokedReason string     `bun:"revoked_reason,notnull"`
}

// refreshToken is a row of auth_refresh_tokens: a refresh token's hash, current or spent.
type refreshToken struct {
	bun.BaseModel `bun:"table:auth_refresh_tokens"`

	TokenHash []byte     `bun:"token_hash,pk"`
	SessionID int64      `bun:"session_id,notnull"`
	IssuedAt  time.Time  `bun:"issued_at,nullzero,notnull,default:current_timestamp"`
	SpentAt   *time.Time `bun:"spent_at"`
}

// Client is where a sign-in or a refresh comes from, kept with the session.
type Client struct{ IP, UserAgent string }

// maxUserAgent bounds the user agent kept with a session.
const maxUserAgent = 512

// userAgent is the user agent as kept: valid UTF-8 without NUL (what a text column takes), its
// first maxUserAgent bytes, cut at a character boundary.
func (c Client) userAgent() string {
	ua := strings.ReplaceAll(strings.ToValidUTF8(c.UserAgent, "\uFFFD"), "\x00", "")
	if len(ua) <= maxUserAgent {
		return ua
	}
	ua = ua[:maxUserAgent]
	for !utf8.ValidString(ua) {
		ua = ua[:len(ua)-1]
	}
	return ua
}

// Why sessions end (revoked_reason, and the audit events' reason).
const (
	endLogout      = "logout"
	endByUser      = "ended by the user"
	endByAdmin     = "ended by an admin"
	endReused      = "refresh token reused"
	endUserChanged = "the account changed (password reset, role change or deletion)"
)

var errBadRefresh = fault.Unauthorized("Invalid, expired or revoked refresh token; sign in again")

func tokenHash(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// successor is the refresh token that follows token.
func (s *Sessions) successor(token string) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(token))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Start begins a session of u (the user as just read) signed in through provider; mfa says that
// the sign-in passed a second factor now.
func (s *Sessions) Start(ctx context.Context, u *User, provider string, c Client, mfa bool) (*AuthResult, error) {
	now := time.Now()
	sess := &session{UserID: u.ID, Provider: provider, IP: c.IP, UserAgent: c.userAgent(), Stamp: u.SecurityStamp, Role: u.Role,
		ExpiresAt: now.Add(s.cfg.RefreshTTL())}
	if mfa {
		sess.MFAAt = &now
	}
	refresh := secrets.RandomToken(32)
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(sess).Returning("id, created_at, last_used_at").Exec(ctx); err != nil {
			return fmt.Errorf("start session: %w", err)
		}
		if _, err := tx.NewInsert().Model(&refreshToken{TokenHash: tokenHash(refresh), SessionID: sess.ID}).Exec(ctx); err != nil {
			return fmt.Errorf("store refresh token: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.result(u, sess, refresh)
}

// result is the answer of a sign-in or a refresh: a new access token of sess and its refresh token.
func (s *Sessions) result(u *User, sess *session, refresh string) (*AuthResult, error) {
	tok, err := s.tokens.Issue(authn.User{ID: u.ID, Email: u.Email, Name: u.FullName, Role: u.Role,
		SecurityStamp: u.SecurityStamp, SessionID: sess.ID})
	if err != nil {
		return nil, err
	}
	return &AuthResult{
		AccessToken: tok.Token, TokenType: "Bearer", ExpiresAt: tok.ExpiresAt, Provider: sess.Provider,
		User: viewOf(u, "", ""), Token: tok.Token, UserID: u.ID,
		RefreshToken: refresh, RefreshExpiresAt: sess.ExpiresAt.UTC(), SessionID: sess.ID,
	}, nil
}

// withIdentity fills the user's provider and providerUserId in the answer of a session signed in
// through GitHub or Google, as the provider's callback does.
func (s *Sessions) withIdentity(ctx context.Context, res *AuthResult) *AuthResult {
	if res.Provider == "Password" {
		return res
	}
	var pid string
	if err := s.db.NewSelect().Model((*identity)(nil)).Column("provider_user_id").Where("user_id = ?", res.UserID).
		Where("provider = ?", strings.ToLower(res.Provider)).OrderExpr("id").Limit(1).Scan(ctx, &pid); err == nil {
		res.User.Provider, res.User.ProviderUserID = res.Provider, pid
	}
	return res
}

// refreshed is what one refresh's transaction decided.
type refreshed struct {
	u       *User
	sess    session
	refresh string // the token to answer; "" when the session ended
}

// Refresh spends a refresh token: a new access token and the token's successor. A spent token
// presented within Auth:RefreshReuseSeconds of its rotation answers the session's current token
// (the successor, or the one after it when that was spent meanwhile) without rotating again;
// presented later it ends the session. A session whose user is gone, or whose security stamp or
// role changed since the sign-in, ends too. Every refusal is the same 401.
func (s *Sessions) Refresh(ctx context.Context, token string, c Client) (*AuthResult, error) {
	if token == "" {
		return nil, errBadRefresh
	}
	var out refreshed
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		out = refreshed{}
		var sid int64
		err := tx.NewSelect().Model((*refreshToken)(nil)).Column("session_id").Where("token_hash = ?", tokenHash(token)).Scan(ctx, &sid)
		if errors.Is(err, sql.ErrNoRows) {
			return errBadRefresh
		}
		if err != nil {
			return fmt.Errorf("find refresh token: %w", errors.Join(fault.ErrUnavailable, err))
		}
		// The session's row is locked first: refreshes of one session queue, and the token is
		// read again under the lock (two tabs with one token: one rotates, the other sees it spent).
		if err := tx.NewSelect().Model(&out.sess).Where("id = ?", sid).For("UPDATE").Scan(ctx); err != nil {
			return fmt.Errorf("lock session: %w", err)
		}
		if out.sess.RevokedAt != nil || !out.sess.ExpiresAt.After(time.Now()) {
			return errBadRefresh
		}
		var tok struct {
			Spent  bool `bun:"spent"`
			Recent bool `bun:"recent"`
		}
		if err := tx.NewSelect().Model((*refreshToken)(nil)).ColumnExpr("spent_at IS NOT NULL AS spent").
			ColumnExpr("coalesce(spent_at >= now() - make_interval(secs => ?), false) AS recent", s.cfg.RefreshReuseSeconds).
			Where("token_hash = ?", tokenHash(token)).Scan(ctx, &tok); err != nil {
			return fmt.Errorf("read refresh token: %w", err)
		}
		u := new(User)
		err = tx.NewSelect().Model(u).Where("id = ?", out.sess.UserID).Where("deleted_at IS NULL").Scan(ctx)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("load user: %w", err)
		}
		switch {
		case err != nil || u.SecurityStamp != out.sess.Stamp || u.Role != out.sess.Role:
			return s.endTx(ctx, tx, out.sess.UserID, []int64{sid}, endUserChanged, nil)
		case !tok.Spent:
			out.refresh = s.successor(token)
			err = s.rotate(ctx, tx, &out.sess, token, out.refresh, c)
		case tok.Recent:
			out.refresh, err = s.current(ctx, tx, sid, token)
			if err == nil && out.refresh == "" {
				err = s.endTx(ctx, tx, out.sess.UserID, []int64{sid}, endReused, nil)
			}
		default:
			err = s.endTx(ctx, tx, out.sess.UserID, []int64{sid}, endReused, nil)
		}
		out.u = u
		return err
	})
	if err != nil {
		return nil, err
	}
	if out.refresh == "" {
		return nil, errBadRefresh
	}
	res, err := s.result(out.u, &out.sess, out.refresh)
	if err != nil {
		return nil, err
	}
	return s.withIdentity(ctx, res), nil
}

// rotate spends token and stores next as the session's refresh token; the session's refresh
// lifetime starts again. Spent tokens older than that lifetime are forgotten.
func (s *Sessions) rotate(ctx context.Context, tx bun.Tx, sess *session, token, next string, c Client) error {
	if _, err := tx.NewUpdate().Model((*refreshToken)(nil)).Set("spent_at = now()").
		Where("token_hash = ?", tokenHash(token)).Exec(ctx); err != nil {
		return fmt.Errorf("spend refresh token: %w", err)
	}
	if _, err := tx.NewInsert().Model(&refreshToken{TokenHash: tokenHash(next), SessionID: sess.ID}).Exec(ctx); err != nil {
		return fmt.Errorf("store refresh token: %w", err)
	}
	sess.ExpiresAt = time.Now().Add(s.cfg.RefreshTTL())
	if _, err := tx.NewUpdate().Model(sess).Set("last_used_at = now()").Set("expires_at = ?", sess.ExpiresAt).
		Set("ip = ?", c.IP).Set("user_agent = ?", c.userAgent()).WherePK().Returning("last_used_at").Exec(ctx); err != nil {
		return fmt.Errorf("refresh session: %w", err)
	}
	if _, err := tx.NewDelete().Model((*refreshToken)(nil)).Where("session_id = ?", sess.ID).
		Where("spent_at < now() - make_interval(days => ?)", s.cfg.RefreshDays).Exec(ctx); err != nil {
		return fmt.Errorf("forget old refresh tokens: %w", err)
	}
	return nil
}

// maxChain bounds how far current follows the successors of a token spent within the reuse time.
const maxChain = 8

// current is the session's unspent refresh token reached from token by successors, or "".
func (s *Sessions) current(ctx context.Context, tx bun.Tx, sid int64, token string) (string, error) {
	t := token
	for range maxChain {
		t = s.successor(t)
		var spent bool
		err := tx.NewSelect().Model((*refreshToken)(nil)).ColumnExpr("spent_at IS NOT NULL").
			Where("token_hash = ?", tokenHash(t)).Where("session_id = ?", sid).Scan(ctx, &spent)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil
		}
		if err != nil {
			return "", fmt.Errorf("follow refresh tokens: %w", err)
		}
		if !spent {
			return t, nil
		}
	}
	return "", nil
}

// endTx ends the live sessions of userID among ids (nil: every one but those in except) and
// records user.session.ended with the reason and the ids ended; it answers how many ended.
func (s *Sessions) endTx(ctx context.Context, tx bun.IDB, userID int64, ids []int64, reason string, except []int64) error {
	_, err := s.endCount(ctx, tx, userID, ids, reason, except)
	return err
}

func (s *Sessions) endCount(ctx context.Context, tx bun.IDB, userID int64, ids []int64, reason string, except []int64) (int, error) {
	q := tx.NewUpdate().Model((*session)(nil)).Set("revoked_at = now()").Set("revoked_reason = ?", reason).
		Where("user_id = ?", userID).Where("revoked_at IS NULL").Returning("id")
	if ids != nil {
		q = q.Where("id IN (?)", bun.In(ids))
	}
	if len(except) > 0 {
		q = q.Where("id NOT IN (?)", bun.In(except))
	}
	var ended []int64
	if err := q.Scan(ctx, &ended); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("end sessions: %w", err)
	}
	if len(ended) == 0 {
		return 0, nil
	}
	action := "user.session.ended"
	if reason == endReused {
		action = "user.session.refresh_reused"
	}
	return len(ended), s.audit.RecordTx(ctx, tx, audit.Event{Action: action, UserID: audit.Int64(userID), TargetType: "user",
		TargetID: fmt.Sprint(userID), Details: map[string]any{"sessionIds": ended, "reason": reason}})
}

// Session implements authn.Sessions.
func (s *Sessions) Session(ctx context.Context, id int64) (authn.Session, error) {
	st, err := s.cache.Get(ctx, id, func(ctx context.Context) (sessionState, error) {
		var row struct {
			UserID int64      `bun:"user_id"`
			Live   bool       `bun:"live"`
			MFAAt  *time.Time `bun:"mfa_at"`
			MFAOn  bool       `bun:"mfa_on"`
		}
		err := s.db.NewSelect().TableExpr("auth_sessions AS s").Column("s.user_id", "s.mfa_at").
			ColumnExpr("s.revoked_at IS NULL AS live").
			ColumnExpr("EXISTS (SELECT 1 FROM user_totp t WHERE t.user_id = s.user_id AND t.enabled_at IS NOT NULL) AS mfa_on").
			Where("s.id = ?", id).Scan(ctx, &row)
		if errors.Is(err, sql.ErrNoRows) {
			return sessionState{}, authn.ErrNoSession
		}
		if err != nil {
			return sessionState{}, fmt.Errorf("load session: %w", errors.Join(fault.ErrUnavailable, err))
		}
		out := sessionState{userID: row.UserID, live: row.Live, mfaOn: row.MFAOn}
		if row.MFAAt != nil {
			out.mfaAt = row.MFAAt.UnixNano()
		}
		return out, nil
	})
	if err != nil {
		return authn.Session{}, err
	}
	return st.session(), nil
}

var _ authn.Sessions = (*Sessions)(nil)
