package aikeys

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"provisioner/platform/audit"
	"provisioner/platform/coherent"
	"provisioner/platform/db"
	"provisioner/platform/fault"
	"provisioner/platform/secrets"
)

// Keys manages AI keys and authenticates them on the hot path: the SHA-256 of the presented key
// is looked up in a cache kept coherent with ai_keys (and the rotated-out texts of
// ai_key_retired_hashes) on every replica (platform/coherent), so a rotation or revocation applies
// on the next request whichever replica serves it, and a check costs no network round trip.
type Keys struct {
	db         *bun.DB
	audit      *audit.Recorder
	maxPerUser int
	byHash     *coherent.Cache[[32]byte, Principal]
	// ceilings caches each key owner's monthly token ceiling (users.ai_monthly_token_budget).
	ceilings *coherent.Cache[int64, int64]
	// defaultBudget is AiKeys:DefaultMonthlyTokenBudget (0: none).
	defaultBudget int64
}

// NewKeys builds the key service; bus keeps its cache coherent (nil: every check reads the row).
func NewKeys(d *bun.DB, a *audit.Recorder, bus *coherent.Bus, maxPerUser int) *Keys {
	return &Keys{db: d, audit: a, maxPerUser: maxPerUser, byHash: coherent.NewCache(bus, coherent.CacheOptions[[32]byte, Principal]{
		Table: "ai_keys", Also: []string{"ai_key_retired_hashes"}, Tag: func(_ [32]byte, p Principal) string { return strconv.FormatInt(p.KeyID, 10) }, TTL: CacheTTL,
	}), ceilings: coherent.NewCache(bus, coherent.CacheOptions[int64, int64]{
		Table: "users", Tag: coherent.IDTag[int64], Key: coherent.IDKey, TTL: CacheTTL,
	})}
}

// Principal is the key a generation request authenticated with.
type Principal struct {
	KeyID, UserID int64
	ExpiresAt     *time.Time
	// ValidUntil, when set, ends the grace period of the rotated-out text presented.
	ValidUntil *time.Time
	// Policy is the key's own narrowing of the platform's caps, and its budgets.
	Policy KeyPolicy
	// UserTokenBudget is the owner's ceiling in tokens per calendar month (UTC) across all their
	// keys, set by admins (users.ai_monthly_token_budget); 0: none.
	UserTokenBudget int64
}

// KeyPolicy is what a key's owner (or an admin) set for it; zero values leave the platform's.
type KeyPolicy struct {
	AllowedModels       []string // a subset of Ai:AllowedModels; empty: the platform's
	MaxTokensPerRequest int      // at most Ai:MaxTokensPerRequest; 0: the platform's
	TokenBudget         int64    // tokens per BudgetPeriod; 0: none
	RequestBudget       int64    // requests per BudgetPeriod; 0: none
	BudgetPeriod        string   // PeriodDay, PeriodMonth or PeriodNone
}

func hashKey(k string) [32]byte { return sha256.Sum256([]byte(k)) }

// newKeyText is KeyPrefix plus 32 characters of [A-Za-z0-9] (about 190 bits).
func newKeyText() string { return KeyPrefix + secrets.RandomString(32) }

func displayPrefix(k string) string { return k[:len(KeyPrefix)+4] }

// errUnknownKey means no live key has the presented hash (never cached).
var errUnknownKey = errors.New("unknown ai key")

// Authenticate returns the principal of a presented key, or 401.
func (s *Keys) Authenticate(ctx context.Context, presented string) (Principal, error) {
	bad := fault.Unauthorized("Invalid, revoked or expired API key")
	if !strings.HasPrefix(presented, KeyPrefix) || len(presented) > 128 {
		return Principal{}, bad
	}
	h := hashKey(presented)
	p, err := s.byHash.Get(ctx, h, func(ctx context.Context) (Principal, error) { return s.lookup(ctx, h) })
	if errors.Is(err, errUnknownKey) {
		return Principal{}, bad
	}
	if err != nil {
		return Principal{}, err
	}
	now := time.Now()
	if (p.ExpiresAt != nil && now.After(*p.ExpiresAt)) || (p.ValidUntil != nil && now.After(*p.ValidUntil)) {
		return Principal{}, bad
	}
	if p.UserTokenBudget, err = s.ceilings.Get(ctx, p.UserID, func(ctx context.Context) (int64, error) { return s.ceiling(ctx, p.UserID) }); err != nil {
		return Principal{}, err
	}
	return p, nil
}

// ceiling reads a user's monthly token ceiling (0: none). The column is the admin module's (its
// migration adds it); read by name from the row, so keys work without it (no ceiling).
func (s *Keys) ceiling(ctx context.Context, userID int64) (int64, error) {
	var n int64
	err := s.db.NewRaw("SELECT coalesce((to_jsonb(u) ->> 'ai_monthly_token_budget')::bigint, 0) FROM users u WHERE id = ?", userID).Scan(ctx, &n)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("read the ai budget of user %d: %w", userID, errors.Join(fault.ErrUnavailable, err))
	}
	return n, nil
}

// lookup reads the active key whose current text, or a rotated-out text still in its grace
// period, hashes to h.
func (s *Keys) lookup(ctx context.Context, h [32]byte) (Principal, error) {
	var p Principal
	pol := &p.Policy
	err := s.db.NewRaw(`SELECT k.id, k.user_id, k.expires_at, v.valid_until, coalesce(k.allowed_models, '{}'),
  coalesce(k.max_tokens_per_request, 0), coalesce(k.token_budget, 0), coalesce(k.request_budget, 0), k.budget_period
FROM (SELECT id AS key_id, NULL::timestamptz AS valid_until FROM ai_keys WHERE key_hash = ? AND status = ?
      UNION ALL
      SELECT key_id, valid_until FROM ai_key_retired_hashes WHERE hash = ? AND valid_until > now()) v
JOIN ai_keys k ON k.id = v.key_id AND k.status = ?
LIMIT 1`, h[:], StatusActive, h[:], StatusActive).Scan(ctx, &p.KeyID, &p.UserID, &p.ExpiresAt, &p.ValidUntil,
		pgdialect.Array(&pol.AllowedModels), &pol.MaxTokensPerRequest, &pol.TokenBudget, &pol.RequestBudget, &pol.BudgetPeriod)
	if errors.Is(err, sql.ErrNoRows) {
		return Principal{}, errUnknownKey
	}
	if err != nil {
		return Principal{}, fmt.Errorf("look up ai key: %w", errors.Join(fault.ErrUnavailable, err))
	}
	return p, nil
}

// usable restricts q to the keys that authenticate: Active and not past expiresAt.
func usable(q *bun.SelectQuery) *bun.SelectQuery {
	return q.Where("status = ?", StatusActive).Where("(expires_at IS NULL OR expires_at > now())")
}

// latestExpiry bounds a key's expiresAt: every view of the key writes it as RFC 3339 in UTC, which
// has four digits for the year (Go's time.MarshalJSON fails past 9999), so a later instant, such as
// 9999-12-31T23:59:59-01:00, would be stored and then fail every answer listing the key (500).
var latestExpiry = time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC)

// expiresAtProblem says what is wrong with a requested expiresAt ("" when nil or fine).
func expiresAtProblem(t *time.Time) string {
	switch {
	case t == nil:
		return ""
	case !t.After(time.Now()):
		return "must be in the future"
	case !t.Before(latestExpiry):
		return "must be before 10000-01-01T00:00:00Z"
	}
	return ""
}

// CreateInput asks for a key.
type CreateInput struct {
	UserID    int64
	Name      string
	ExpiresAt *time.Time
	Policy    PolicyBody // checked by the caller (PolicyBody.check)
}

// Create makes a key; the plain text is in the answer only.
func (s *Keys) Create(ctx context.Context, in CreateInput) (*View, error) {
	name := strings.TrimSpace(in.Name)
	var invalid []fault.FieldError
	if name == "" {
		invalid = append(invalid, fault.FieldError{Field: "name", Message: "must not be blank"})
	}
	if msg := expiresAtProblem(in.ExpiresAt); msg != "" {
		invalid = append(invalid, fault.FieldError{Field: "expiresAt", Message: msg})
	}
	if len(invalid) > 0 {
		return nil, fault.Invalid("Validation failed", invalid...)
	}
	text := newKeyText()
	h := hashKey(text)
	k := &Key{UserID: in.UserID, Name: name, Prefix: displayPrefix(text), KeyHash: h[:], Status: StatusActive, ExpiresAt: in.ExpiresAt, BudgetPeriod: PeriodNone}
	if in.Policy.TokenBudget == nil && s.defaultBudget > 0 {
		b := s.defaultBudget
		k.TokenBudget, k.BudgetPeriod = &b, PeriodMonth
	}
	in.Policy.apply(k)
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		if err := db.LockLiveUser(ctx, tx, in.UserID); err != nil {
			return err
		}
		// Only usable keys count: an expired key is refused and cannot be revived.
		n, err := usable(tx.NewSelect().Model((*Key)(nil)).Where("user_id = ?", in.UserID)).Count(ctx)
		if err != nil {
			return fmt.Errorf("count ai keys: %w", err)
		}
		if n >= int64(s.maxPerUser) {
			return fault.Conflict(fmt.Sprintf("Quota reached: at most %d active AI keys per user (expired and revoked keys do not count)", s.maxPerUser))
		}
		if _, err := tx.NewInsert().Model(k).Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("store ai key: %w", err)
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "aikey.created", UserID: audit.Int64(in.UserID), TargetType: "aiKey",
			TargetID: fmt.Sprint(k.ID), Details: map[string]any{"name": k.Name, "prefix": k.Prefix}})
	})
	if err != nil {
		return nil, err
	}
	v := view(k)
	v.Key = text
	return &v, nil
}

func (s *Keys) lockOwn(ctx context.Context, tx bun.Tx, id, userID int64) (*Key, error) {
	k := new(Key)
	if err := tx.NewSelect().Model(k).Where("id = ?", id).Where("user_id = ?", userID).For("UPDATE").Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fault.NotFound("AI key not found")
		}
		return nil, fmt.Errorf("lock ai key %d: %w", id, err)
	}
	return k, nil
}

// MaxGraceTexts bounds the rotated-out texts of a key that are in their grace period at once.
const MaxGraceTexts = 10

// retiredHash is a rotated-out key text that works until ValidUntil (its grace period).
type retiredHash struct {
	bun.BaseModel `bun:"table:ai_key_retired_hashes,alias:r"`

	Hash       []byte    `bun:"hash,pk"`
	KeyID      int64     `bun:"key_id,notnull"`
	ValidUntil time.Time `bun:"valid_until,notnull"`
}

// Rotate gives the key new text; the old text works for gracePeriod more (0: stops at once). Every
// rotated-out text keeps its own grace period whatever later rotations do (a rotation without grace
// ends only the text it rotates out); revocation, user deletion and the key's expiresAt end them
// all. At most MaxGraceTexts texts are in their grace period at once (409 past it). The key's id,
// usage and limits carry over.
func (s *Keys) Rotate(ctx context.Context, id, userID int64, grace time.Duration) (*View, error) {
	text := newKeyText()
	h := hashKey(text)
	var out *Key
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		k, err := s.lockOwn(ctx, tx, id, userID)
		if err != nil {
			return err
		}
		if k.Status != StatusActive {
			return fault.Conflict("A revoked key cannot be rotated")
		}
		if k.ExpiresAt != nil && !time.Now().Before(*k.ExpiresAt) {
			return fault.Conflict("An expired key cannot be rotated (its new text would be refused too)")
		}
		// Texts whose grace ended are refused already; forget them.
		if _, err := tx.NewDelete().Model((*retiredHash)(nil)).Where("key_id = ?", id).Where("valid_until <= now()").Exec(ctx); err != nil {
			return fmt.Errorf("prune rotated-out texts of ai key %d: %w", id, err)
		}
		if grace > 0 {
			n, err := tx.NewSelect().Model((*retiredHash)(nil)).Where("key_id = ?", id).Count(ctx)
			if err != nil {
				return fmt.Errorf("count rotated-out texts of ai key %d: %w", id, err)
			}
			if n >= MaxGraceTexts {
				return fault.Conflict(fmt.Sprintf("At most %d rotated-out texts of a key can be in their grace period at once: "+
					"rotate with gracePeriodSeconds 0, or wait until a grace period ends", MaxGraceTexts))
			}
			r := &retiredHash{Hash: k.KeyHash, KeyID: id, ValidUntil: time.Now().Add(grace)}
			if _, err := tx.NewInsert().Model(r).Exec(ctx); err != nil {
				return fmt.Errorf("keep rotated-out text of ai key %d: %w", id, err)
			}
		}
		if _, err := tx.NewUpdate().Model(k).Set("key_hash = ?", h[:]).Set("prefix = ?", displayPrefix(text)).Set("updated_at = now()").
			WherePK().Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("rotate ai key %d: %w", id, err)
		}
		out = k
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "aikey.rotated", UserID: audit.Int64(userID), TargetType: "aiKey",
			TargetID: fmt.Sprint(id), Details: map[string]any{"gracePeriodSeconds": int(grace.Seconds())}})
	})
	if err != nil {
		return nil, err
	}
	v := view(out)
	v.Key = text
	return &v, nil
}

// Revoke stops a key at once, on every replica.
func (s *Keys) Revoke(ctx context.Context, id, userID int64) (*View, error) {
	var out *Key
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		k, err := s.lockOwn(ctx, tx, id, userID)
		if err != nil {
			return err
		}
		if k.Status == StatusRevoked {
			return fault.Conflict("The key is already revoked")
		}
		if _, err := tx.NewUpdate().Model(k).Set("status = ?", StatusRevoked).Set("revoked_at = now()").
			Set("updated_at = now()").WherePK().Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("revoke ai key %d: %w", id, err)
		}
		// Its rotated-out texts end with it (refused already: the key is no longer Active).
		if _, err := tx.NewDelete().Model((*retiredHash)(nil)).Where("key_id = ?", id).Exec(ctx); err != nil {
			return fmt.Errorf("end grace periods of ai key %d: %w", id, err)
		}
		out = k
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "aikey.revoked", UserID: audit.Int64(userID), TargetType: "aiKey", TargetID: fmt.Sprint(id)})
	})
	if err != nil {
		return nil, err
	}
	v := view(out)
	return &v, nil
}

// EndedKeysListedFor is how long a revoked or expired key stays in its owner's list (with its
// usage) after it stopped working. Past that it is left out, so the list does not grow with every
// key ever made; the row, its usage and its audit events are kept.
const EndedKeysListedFor = 30 * 24 * time.Hour

// MaxEndedKeysListed bounds the revoked or expired keys the list shows: the most recently ended
// ones within EndedKeysListedFor. Creating and revoking keys in a loop (RateLimit:PerUser allows
// hundreds of rounds a minute) otherwise made a list of hundreds of thousands of keys within a
// day, read, held and written whole by every GET (200,000 keys: 45 MB, 9 s).
const MaxEndedKeysListed = 100

// List returns the user's keys (never their text), by id: the live ones, and the latest
// MaxEndedKeysListed of those revoked or expired within EndedKeysListedFor.
func (s *Keys) List(ctx context.Context, userID int64) ([]View, error) {
	var live, ended []Key
	if err := usable(s.db.NewSelect().Model(&live).Where("user_id = ?", userID)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("list ai keys: %w", err)
	}
	since := time.Now().Add(-EndedKeysListedFor)
	if err := s.db.NewSelect().Model(&ended).Where("user_id = ?", userID).
		Where("((status = ? AND expires_at <= now() AND expires_at > ?) OR (status <> ? AND coalesce(revoked_at, created_at) > ?))",
			StatusActive, since, StatusActive, since).
		OrderExpr("CASE WHEN status = ? THEN expires_at ELSE coalesce(revoked_at, created_at) END DESC, id DESC", StatusActive).
		Limit(MaxEndedKeysListed).Scan(ctx); err != nil {
		return nil, fmt.Errorf("list ai keys: %w", err)
	}
	rows := append(live, ended...)
	slices.SortFunc(rows, func(a, b Key) int { return cmp.Compare(a.ID, b.ID) })
	out := make([]View, len(rows))
	for i := range rows {
		out[i] = view(&rows[i])
	}
	return out, nil
}

// ReleaseUser revokes every key of a deleted user, in the deleting transaction, and records
// aikey.revoked for each (as a revoke by its owner does; the actor is whoever deleted the user).
func (s *Keys) ReleaseUser(ctx context.Context, tx bun.IDB, userID int64) error {
	var revoked []int64
	if err := tx.NewUpdate().Model((*Key)(nil)).Set("status = ?", StatusRevoked).Set("revoked_at = now()").
		Set("updated_at = now()").Where("user_id = ?", userID).Where("status = ?", StatusActive).
		Returning("id").Scan(ctx, &revoked); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("revoke ai keys of user %d: %w", userID, err)
	}
	if _, err := tx.NewDelete().Model((*retiredHash)(nil)).
		Where("key_id IN (SELECT id FROM ai_keys WHERE user_id = ?)", userID).Exec(ctx); err != nil {
		return fmt.Errorf("end grace periods of the ai keys of user %d: %w", userID, err)
	}
	for _, id := range revoked {
		if err := s.audit.RecordTx(ctx, tx, audit.Event{Action: "aikey.revoked", UserID: audit.Int64(userID), TargetType: "aiKey",
			TargetID: fmt.Sprint(id), Details: map[string]any{"reason": "user.deleted"}}); err != nil {
			return err
		}
	}
	return nil
}

// RevokeOnTakeover revokes every live key of an account that a password reset has just taken over
// (provision.TakeoverRevoker), in the reset's transaction: whoever made the account before its
// email was proven may hold them. Each key's revocation is audited (aikey.revoked, with the
// reason). The cache entries go on every replica with the commit (the ai_keys trigger), and the
// reset's answer waits for them, as for any revocation.
func (s *Keys) RevokeOnTakeover(ctx context.Context, tx bun.IDB, userID int64) (map[string]any, error) {
	var ids []int64
	if err := tx.NewUpdate().Model((*Key)(nil)).Set("status = ?", StatusRevoked).Set("revoked_at = now()").
		Set("updated_at = now()").Where("user_id = ?", userID).Where("status = ?", StatusActive).
		Returning("id").Scan(ctx, &ids); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("revoke ai keys of user %d: %w", userID, err)
	}
	if _, err := tx.NewDelete().Model((*retiredHash)(nil)).
		Where("key_id IN (SELECT id FROM ai_keys WHERE user_id = ?)", userID).Exec(ctx); err != nil {
		return nil, fmt.Errorf("end grace periods of the ai keys of user %d: %w", userID, err)
	}
	if len(ids) == 0 {
		return map[string]any{}, nil
	}
	for _, id := range ids {
		if err := s.audit.RecordTx(ctx, tx, audit.Event{Action: "aikey.revoked", UserID: audit.Int64(userID), TargetType: "aiKey",
			TargetID: fmt.Sprint(id), Details: map[string]any{"reason": "password reset took the account over"}}); err != nil {
			return nil, err
		}
	}
	return map[string]any{"aiKeys": ids}, nil
}
