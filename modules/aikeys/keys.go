package aikeys

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// Keys manages AI keys and authenticates them on the hot path.
//
// A key check looks the SHA-256 of the presented key up in a short-lived in-process cache, then
// in the database (no password-grade KDF: the keys carry ~190 bits of randomness). Every rotation,
// revocation and user deletion bumps a revocation version in Redis once committed; a cached entry
// is used only while the version it was cached under is still current, read on every request (one
// GET), so the change takes effect on the next request whichever replica serves it. When the
// version cannot be read (Redis down) nothing is cached. Without Redis (one replica) the version
// is a local counter.
type Keys struct {
	db         *bun.DB
	audit      *audit.Recorder
	redis      *redis.Client
	verKey     string
	maxPerUser int
	log        *slog.Logger

	mu       sync.RWMutex
	cache    map[[32]byte]cached
	cacheTTL time.Duration
	localVer atomic.Int64
}

type cached struct {
	principal Principal
	until     time.Time // cache entry expiry
	version   int64     // the revocation version it was cached under
}

// Principal is the key a generation request authenticated with.
type Principal struct {
	KeyID, UserID int64
	ExpiresAt     *time.Time
	// ValidUntil, when set, ends a rotated-out key's grace period.
	ValidUntil *time.Time
}

func hashKey(k string) [32]byte { return sha256.Sum256([]byte(k)) }

// newKeyText is KeyPrefix plus 32 characters of [A-Za-z0-9] (about 190 bits).
func newKeyText() string { return KeyPrefix + secrets.RandomString(32) }

func displayPrefix(k string) string { return k[:len(KeyPrefix)+4] }

// version reads the revocation version; ok is false when it cannot be read.
func (s *Keys) version(ctx context.Context) (v int64, ok bool) {
	if s.redis == nil {
		return s.localVer.Load(), true
	}
	v, err := s.redis.Get(ctx, s.verKey).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, true
	}
	return v, err == nil
}

// bump makes every replica's cached key checks stale; called once a change is committed.
func (s *Keys) bump(ctx context.Context) {
	s.localVer.Add(1)
	if s.redis != nil {
		if err := s.redis.Incr(ctx, s.verKey).Err(); err != nil {
			// Replicas that cannot read the version do not cache, so they stay correct.
			s.log.WarnContext(ctx, "ai key revocation version not bumped", "error", err.Error())
		}
	}
	s.mu.Lock()
	s.cache = map[[32]byte]cached{}
	s.mu.Unlock()
}

// Authenticate returns the principal of a presented key, or 401.
func (s *Keys) Authenticate(ctx context.Context, presented string) (Principal, error) {
	bad := httpx.Unauthorized("Invalid, revoked or expired API key")
	if !strings.HasPrefix(presented, KeyPrefix) || len(presented) > 128 {
		return Principal{}, bad
	}
	h := hashKey(presented)
	now := time.Now()
	ver, verOK := s.version(ctx)
	s.mu.RLock()
	c, ok := s.cache[h]
	s.mu.RUnlock()
	if !ok || now.After(c.until) || !verOK || c.version != ver {
		k := new(Key)
		err := s.db.NewSelect().Model(k).Column("id", "user_id", "key_hash", "previous_hash", "previous_valid_until", "expires_at").
			Where("status = ?", StatusActive).
			WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
				return q.Where("key_hash = ?", h[:]).WhereOr("previous_hash = ? AND previous_valid_until > now()", h[:])
			}).Limit(1).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return Principal{}, bad
		}
		if err != nil {
			return Principal{}, fmt.Errorf("look up ai key: %w", errors.Join(httpx.ErrUnavailable, err))
		}
		p := Principal{KeyID: k.ID, UserID: k.UserID, ExpiresAt: k.ExpiresAt}
		if string(k.KeyHash) != string(h[:]) {
			p.ValidUntil = k.PreviousValidUntil
		}
		c = cached{principal: p, until: now.Add(s.cacheTTL), version: ver}
		if verOK {
			s.mu.Lock()
			s.cache[h] = c
			s.mu.Unlock()
		}
	}
	p := c.principal
	if (p.ExpiresAt != nil && now.After(*p.ExpiresAt)) || (p.ValidUntil != nil && now.After(*p.ValidUntil)) {
		return Principal{}, bad
	}
	return p, nil
}

// CreateInput asks for a key.
type CreateInput struct {
	UserID    int64
	Name      string
	ExpiresAt *time.Time
}

// Create makes a key; the plain text is in the answer only.
func (s *Keys) Create(ctx context.Context, in CreateInput) (*View, error) {
	if in.ExpiresAt != nil && !in.ExpiresAt.After(time.Now()) {
		return nil, httpx.BadRequest("Validation failed", httpx.FieldError{Field: "expiresAt", Message: "must be in the future"})
	}
	text := newKeyText()
	h := hashKey(text)
	k := &Key{UserID: in.UserID, Name: strings.TrimSpace(in.Name), Prefix: displayPrefix(text), KeyHash: h[:], Status: StatusActive, ExpiresAt: in.ExpiresAt}
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := db.LockLiveUser(ctx, tx, in.UserID); err != nil {
			return err
		}
		n, err := tx.NewSelect().Model((*Key)(nil)).Where("user_id = ?", in.UserID).Where("status = ?", StatusActive).Count(ctx)
		if err != nil {
			return fmt.Errorf("count ai keys: %w", err)
		}
		if n >= int64(s.maxPerUser) {
			return httpx.Conflict(fmt.Sprintf("Quota reached: at most %d active AI keys per user", s.maxPerUser))
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
			return nil, httpx.NotFound("AI key not found")
		}
		return nil, fmt.Errorf("lock ai key %d: %w", id, err)
	}
	return k, nil
}

// Rotate gives the key new text; the old text works for gracePeriod more (0: stops at once). The
// key's id, usage and limits carry over.
func (s *Keys) Rotate(ctx context.Context, id, userID int64, grace time.Duration) (*View, error) {
	text := newKeyText()
	h := hashKey(text)
	var out *Key
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		k, err := s.lockOwn(ctx, tx, id, userID)
		if err != nil {
			return err
		}
		if k.Status != StatusActive {
			return httpx.Conflict("A revoked key cannot be rotated")
		}
		q := tx.NewUpdate().Model(k).Set("key_hash = ?", h[:]).Set("prefix = ?", displayPrefix(text)).Set("updated_at = now()")
		if grace > 0 {
			q = q.Set("previous_hash = key_hash").Set("previous_valid_until = ?", time.Now().Add(grace))
		} else {
			q = q.Set("previous_hash = NULL").Set("previous_valid_until = NULL")
		}
		if _, err := q.WherePK().Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("rotate ai key %d: %w", id, err)
		}
		out = k
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "aikey.rotated", UserID: audit.Int64(userID), TargetType: "aiKey",
			TargetID: fmt.Sprint(id), Details: map[string]any{"gracePeriodSeconds": int(grace.Seconds())}})
	})
	if err != nil {
		return nil, err
	}
	s.bump(ctx)
	v := view(out)
	v.Key = text
	return &v, nil
}

// Revoke stops a key at once, on every replica.
func (s *Keys) Revoke(ctx context.Context, id, userID int64) (*View, error) {
	var out *Key
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		k, err := s.lockOwn(ctx, tx, id, userID)
		if err != nil {
			return err
		}
		if k.Status == StatusRevoked {
			return httpx.Conflict("The key is already revoked")
		}
		if _, err := tx.NewUpdate().Model(k).Set("status = ?", StatusRevoked).Set("revoked_at = now()").Set("previous_hash = NULL").
			Set("updated_at = now()").WherePK().Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("revoke ai key %d: %w", id, err)
		}
		out = k
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "aikey.revoked", UserID: audit.Int64(userID), TargetType: "aiKey", TargetID: fmt.Sprint(id)})
	})
	if err != nil {
		return nil, err
	}
	s.bump(ctx)
	v := view(out)
	return &v, nil
}

// List returns the user's keys (never their text).
func (s *Keys) List(ctx context.Context, userID int64) ([]View, error) {
	var rows []Key
	if err := s.db.NewSelect().Model(&rows).Where("user_id = ?", userID).OrderExpr("id").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list ai keys: %w", err)
	}
	out := make([]View, len(rows))
	for i := range rows {
		out[i] = view(&rows[i])
	}
	return out, nil
}

// ReleaseUser revokes every key of a deleted user, in the deleting transaction.
func (s *Keys) ReleaseUser(ctx context.Context, tx bun.IDB, userID int64) error {
	if _, err := tx.NewUpdate().Model((*Key)(nil)).Set("status = ?", StatusRevoked).Set("revoked_at = now()").Set("previous_hash = NULL").
		Where("user_id = ?", userID).Where("status = ?", StatusActive).Exec(ctx); err != nil {
		return fmt.Errorf("revoke ai keys of user %d: %w", userID, err)
	}
	return nil
}

// UserReleased makes the deleted user's keys stale on every replica once the revocation is
// committed (earlier, a replica could cache the still-visible key again).
func (s *Keys) UserReleased(ctx context.Context, _ int64) { s.bump(ctx) }

var _ provision.ReleaseNotifier = (*Keys)(nil)
