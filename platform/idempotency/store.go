package idempotency

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uptrace/bun"
)

// entry names one key: the caller's, for one operation.
type entry struct {
	user      int64
	operation string
	key       string
}

// aad binds a sealed value to its entry and its use (request or answer): a value copied to
// another row, or from one column to the other, does not open.
func (e entry) aad(use string) string {
	return "idempotency:" + use + ":" + strconv.FormatInt(e.user, 10) + ":" + e.operation + ":" + e.key
}

// row is a stored key.
type row struct {
	bun.BaseModel `bun:"table:idempotency_keys"`
	UserID        int64      `bun:"user_id,pk"`
	Operation     string     `bun:"operation,pk"`
	Key           string     `bun:"key,pk"`
	Request       string     `bun:"request,notnull"`
	Owner         *string    `bun:"owner,type:uuid"`
	LeaseUntil    *time.Time `bun:"lease_until"`
	Status        *int       `bun:"status"`
	Answer        *string    `bun:"answer"`
	CreatedAt     time.Time  `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	ExpiresAt     time.Time  `bun:"expires_at,notnull"`
}

// outcome is what claim found: the request owns the key (owner set), or it is answered with a
// kept answer, or refused because the key is in flight or was used with another request.
type outcome struct {
	owner    string
	kept     *answer
	inFlight bool
	mismatch bool
}

// claim takes e for a request whose digest is sum: a new key (or one expired) is inserted as in
// flight, owned by a new owner; a key in flight whose lease lapsed (its request's process died)
// is taken over when the request is the same. Otherwise the kept answer, or the refusal.
func (s *Store) claim(ctx context.Context, e entry, sum []byte) (outcome, error) {
	sealed, err := s.sealer.Seal(sum, e.aad("request"))
	if err != nil {
		return outcome{}, err
	}
	owner := newOwner()
	lease, retention := seconds(s.o.Lease), seconds(s.o.Retention)
	var got []string
	err = s.db.NewRaw(`INSERT INTO idempotency_keys AS k (user_id, operation, key, request, owner, lease_until, expires_at)
		VALUES (?, ?, ?, ?, ?, now() + make_interval(secs => ?), now() + make_interval(secs => ?))
		ON CONFLICT (user_id, operation, key) DO UPDATE SET request = EXCLUDED.request, owner = EXCLUDED.owner,
			lease_until = EXCLUDED.lease_until, status = NULL, answer = NULL, created_at = now(), expires_at = EXCLUDED.expires_at
		WHERE k.expires_at <= now()
		RETURNING owner`, e.user, e.operation, e.key, sealed, owner, lease, retention).Scan(ctx, &got)
	if err != nil {
		return outcome{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	if len(got) == 1 {
		return outcome{owner: owner}, nil
	}
	var r row
	err = s.db.NewSelect().Model(&r).Column("request", "owner", "status", "answer").
		Where("user_id = ? AND operation = ? AND key = ?", e.user, e.operation, e.key).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return outcome{inFlight: true}, nil // expired and swept meanwhile: the retry claims it
	}
	if err != nil {
		return outcome{}, fmt.Errorf("read idempotency key: %w", err)
	}
	stored, err := s.sealer.Open(r.Request, e.aad("request"))
	if err != nil {
		return outcome{}, fmt.Errorf("open idempotency request: %w", err)
	}
	if subtle.ConstantTimeCompare(stored, sum) != 1 {
		return outcome{mismatch: true}, nil
	}
	if r.Status != nil && r.Answer != nil {
		a, err := s.open(e, *r.Status, *r.Answer)
		if err != nil {
			return outcome{}, err
		}
		return outcome{kept: a}, nil
	}
	// In flight: taken over only once its lease lapsed, from the owner read (one replica wins).
	res, err := s.db.NewUpdate().Model((*row)(nil)).
		Set("owner = ?", owner).Set("lease_until = now() + make_interval(secs => ?)", lease).
		Where("user_id = ? AND operation = ? AND key = ?", e.user, e.operation, e.key).
		Where("status IS NULL AND lease_until <= now() AND owner = ?", r.Owner).Exec(ctx)
	if err != nil {
		return outcome{}, fmt.Errorf("take over idempotency key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return outcome{owner: owner}, nil
	}
	return outcome{inFlight: true}, nil
}

// extend moves the lease of e on while its owner's request runs.
func (s *Store) extend(ctx context.Context, e entry, owner string) error {
	_, err := s.db.NewUpdate().Model((*row)(nil)).Set("lease_until = now() + make_interval(secs => ?)", seconds(s.o.Lease)).
		Where("user_id = ? AND operation = ? AND key = ? AND owner = ? AND status IS NULL", e.user, e.operation, e.key, owner).Exec(ctx)
	return err
}

// keep stores a's answer for e, sealed; the key is then answered with it until it expires.
func (s *Store) keep(ctx context.Context, e entry, owner string, a *answer) error {
	sealed, err := s.seal(e, a)
	if err != nil {
		return err
	}
	_, err = s.db.NewUpdate().Model((*row)(nil)).Set("status = ?", a.Status).Set("answer = ?", sealed).
		Set("owner = NULL").Set("lease_until = NULL").
		Where("user_id = ? AND operation = ? AND key = ? AND owner = ?", e.user, e.operation, e.key, owner).Exec(ctx)
	if err != nil {
		return fmt.Errorf("keep idempotent answer: %w", err)
	}
	return nil
}

// release forgets e, claimed by owner, whose request was refused before it ran: a retry runs anew.
func (s *Store) release(ctx context.Context, e entry, owner string) error {
	_, err := s.db.NewDelete().Model((*row)(nil)).
		Where("user_id = ? AND operation = ? AND key = ? AND owner = ? AND status IS NULL", e.user, e.operation, e.key, owner).Exec(ctx)
	if err != nil {
		return fmt.Errorf("release idempotency key: %w", err)
	}
	return nil
}

// Start deletes the expired keys every Options.SweepEvery until Stop, so that an answer, sealed
// and never served once expired, is not kept long past its retention on any replica.
func (s *Store) Start() {
	s.stop = make(chan struct{})
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		t := time.NewTicker(s.o.SweepEvery)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), s.o.SweepEvery)
				if _, err := s.Sweep(ctx); err != nil {
					s.log.Warn("sweep expired idempotency keys", "error", err.Error())
				}
				cancel()
			}
		}
	}()
}

// Stop ends Start's sweeps and waits for the one running.
func (s *Store) Stop() {
	if s.stop != nil {
		close(s.stop)
		s.done.Wait()
	}
}

// sweepBatch is how many expired keys one statement deletes.
const sweepBatch = 500

// Sweep deletes every expired key, a batch at a time, and answers how many it deleted.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	var deleted int64
	for {
		res, err := s.db.NewRaw(`DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(
			SELECT ctid FROM idempotency_keys WHERE expires_at <= now() LIMIT ?))`, sweepBatch).Exec(ctx)
		if err != nil {
			return deleted, fmt.Errorf("sweep expired idempotency keys: %w", err)
		}
		n, _ := res.RowsAffected()
		deleted += n
		if n < sweepBatch {
			return deleted, nil
		}
	}
}

// digest is the SHA-256 of what makes two requests the same one.
func digest(parts ...[]byte) []byte {
	h := sha256.New()
	for _, p := range parts {
		_, _ = h.Write([]byte(strconv.Itoa(len(p)) + ":"))
		_, _ = h.Write(p)
	}
	return h.Sum(nil)
}

func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40 // a version 4 UUID
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func seconds(d time.Duration) float64 { return d.Seconds() }
