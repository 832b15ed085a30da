package secrets

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"

	"golang.org/x/crypto/argon2"

	"provisioner/platform/reqctx"
)

// Params are argon2id parameters.
type Params struct {
	MemoryKiB  uint32
	Iterations uint32
	Threads    uint8
	SaltLen    int
	KeyLen     uint32
}

// OWASP is the OWASP Password Storage Cheat Sheet's argon2id setting: m=19 MiB, t=2, p=1.
var OWASP = Params{MemoryKiB: 19456, Iterations: 2, Threads: 1, SaltLen: 16, KeyLen: 32}

// Limits of the parameters a stored hash may carry (see decode).
const (
	maxMemoryKiB = 1 << 16 // 64 MiB
	maxThreads   = 16
	maxWork      = 1 << 18 // memory × iterations, in KiB passes: 256 MiB worth
)

// ErrBadHash means a stored hash is not an argon2id PHC string.
var ErrBadHash = errors.New("password hash is not a valid argon2id PHC string")

// Hasher hashes and verifies passwords with a bounded number of hashes in flight, so a login flood
// waits in line instead of taking every core (and memory) from the rest of the API. The line is
// fair between client addresses (the request's, reqctx.ClientKey: an IPv6 client by its /64): see slots.
type Hasher struct {
	p     Params
	slots *slots
	dummy string
	taken atomic.Uint64 // slots ever taken: hashes and verifications computed or being computed
}

// NewHasher uses the OWASP parameters; maxInFlight <= 0 means half the cores (at least one), so a
// login flood always leaves CPU for the rest of the API.
func NewHasher(maxInFlight int) *Hasher { return NewHasherWithParams(OWASP, maxInFlight) }

// NewHasherWithParams uses p (tests and benchmarks may choose cheaper ones).
func NewHasherWithParams(p Params, maxInFlight int) *Hasher {
	if maxInFlight <= 0 {
		maxInFlight = max(1, runtime.GOMAXPROCS(0)/2)
	}
	h := &Hasher{p: p, slots: newSlots(maxInFlight)}
	h.dummy = h.encode(RandomToken(24))
	return h
}

// acquire takes a slot for the client of ctx's request, in its turn; release gives it back.
func (h *Hasher) acquire(ctx context.Context) (release func(), err error) {
	key := reqctx.ClientKey(ctx)
	if err := h.slots.acquire(ctx, key); err != nil {
		return nil, err
	}
	h.taken.Add(1)
	return func() { h.slots.release(key) }, nil
}

// InFlight is the number of hashes being computed now.
func (h *Hasher) InFlight() int { return h.slots.inUse() }

// Waiting is the number of hashes waiting for a slot.
func (h *Hasher) Waiting() int { return h.slots.queued() }

// Taken is the number of hashes and verifications that have taken a slot since the Hasher was
// made (each computes one argon2id key).
func (h *Hasher) Taken() uint64 { return h.taken.Load() }

func (h *Hasher) encode(password string) string {
	salt := make([]byte, h.p.SaltLen)
	_, _ = rand.Read(salt)
	key := argon2.IDKey([]byte(password), salt, h.p.Iterations, h.p.MemoryKiB, h.p.Threads, h.p.KeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, h.p.MemoryKiB, h.p.Iterations,
		h.p.Threads, base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// Hash returns the PHC string of password.
func (h *Hasher) Hash(ctx context.Context, password string) (string, error) {
	release, err := h.acquire(ctx)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	defer release()
	return h.encode(password), nil
}

type decoded struct {
	p    Params
	salt []byte
	key  []byte
}

func decode(encoded string) (decoded, error) {
	var d decoded
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return d, ErrBadHash
	}
	var v int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &v); err != nil || v != argon2.Version {
		return d, ErrBadHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &d.p.MemoryKiB, &d.p.Iterations, &d.p.Threads); err != nil {
		return d, ErrBadHash
	}
	// Bounds on the work one stored hash may ask for: up to RFC 9106's second recommendation
	// (64 MiB, t=3, p=4) and a little more, never the minutes a corrupted row could demand.
	if d.p.MemoryKiB < 8 || d.p.MemoryKiB > maxMemoryKiB || d.p.Iterations == 0 || d.p.Threads == 0 ||
		d.p.Threads > maxThreads || uint64(d.p.MemoryKiB)*uint64(d.p.Iterations) > maxWork {
		return d, ErrBadHash
	}
	var err error
	if d.salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil || len(d.salt) < 8 {
		return d, ErrBadHash
	}
	if d.key, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(d.key) < 16 || len(d.key) > 128 {
		return d, ErrBadHash
	}
	d.p.KeyLen = uint32(len(d.key))
	return d, nil
}

// Verify reports whether password matches encoded (any valid argon2id PHC string); the
// comparison is constant-time.
func (h *Hasher) Verify(ctx context.Context, password, encoded string) (bool, error) {
	d, err := decode(encoded)
	if err != nil {
		return false, err
	}
	release, err := h.acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("verify password: %w", err)
	}
	defer release()
	key := argon2.IDKey([]byte(password), d.salt, d.p.Iterations, d.p.MemoryKiB, d.p.Threads, d.p.KeyLen)
	return subtle.ConstantTimeCompare(key, d.key) == 1, nil
}

// VerifyDummy does the work of Verify against an internal hash and discards the answer: unknown
// accounts cost the same as wrong passwords.
func (h *Hasher) VerifyDummy(ctx context.Context, password string) {
	_, _ = h.Verify(ctx, password, h.dummy)
}

// NeedsRehash reports whether encoded uses other parameters than the Hasher's.
func (h *Hasher) NeedsRehash(encoded string) bool {
	d, err := decode(encoded)
	return err != nil || d.p.MemoryKiB != h.p.MemoryKiB || d.p.Iterations != h.p.Iterations || d.p.Threads != h.p.Threads
}

// HashPassword hashes an account password: its NFKC form (NormalizePassword).
func (h *Hasher) HashPassword(ctx context.Context, password string) (string, error) {
	return h.Hash(ctx, NormalizePassword(password))
}

// VerifyPassword checks an account password against its stored hash: the NFKC form first (what
// HashPassword hashes); when that fails and the text as typed is not in NFKC, the text as typed (a
// hash made before passwords were normalised). legacy reports that only the text as typed matched:
// the caller stores HashPassword's hash instead. A wrong password not in NFKC costs two
// verifications, which VerifyPasswordDummy matches.
func (h *Hasher) VerifyPassword(ctx context.Context, password, encoded string) (ok, legacy bool, err error) {
	n := NormalizePassword(password)
	if ok, err := h.Verify(ctx, n, encoded); err != nil || ok {
		return ok, false, err
	}
	if n == password {
		return false, false, nil
	}
	ok, err = h.Verify(ctx, password, encoded)
	return ok, ok, err
}

// VerifyPasswordDummy does the work VerifyPassword does for a wrong password (one verification,
// two for a password not in NFKC) and discards it: an unknown account costs what a wrong password
// of a known one does, for the same input.
func (h *Hasher) VerifyPasswordDummy(ctx context.Context, password string) {
	n := NormalizePassword(password)
	h.VerifyDummy(ctx, n)
	if n != password {
		h.VerifyDummy(ctx, password)
	}
}
