package secrets_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/secrets"
)

func TestSealRoundTripAndTampering(t *testing.T) {
	s, err := secrets.NewSealer(secrets.GenerateKey())
	require.NoError(t, err)
	sealed, err := s.Seal([]byte("hunter2-db-password"), "database:42")
	require.NoError(t, err)
	assert.NotContains(t, sealed, "hunter2")
	assert.True(t, strings.HasPrefix(sealed, "v1."+s.ActiveKeyID()+"."))

	pt, err := s.Open(sealed, "database:42")
	require.NoError(t, err)
	assert.Equal(t, "hunter2-db-password", string(pt))

	_, err = s.Open(sealed, "database:43")
	assert.ErrorIs(t, err, secrets.ErrDecrypt, "bound to its aad")
	parts := strings.Split(sealed, ".")
	flipped := []byte(parts[2])
	flipped[len(flipped)/2] ^= 1
	_, err = s.Open(parts[0]+"."+parts[1]+"."+string(flipped), "database:42")
	assert.Error(t, err)
	_, err = s.Open("v1.deadbeef."+parts[2], "database:42")
	assert.ErrorIs(t, err, secrets.ErrUnknownKey)
	_, err = s.Open("garbage", "database:42")
	assert.ErrorIs(t, err, secrets.ErrMalformed)

	other, _ := secrets.NewSealer(secrets.GenerateKey())
	_, err = other.Open(sealed, "database:42")
	assert.Error(t, err)
}

func TestSealKeyRotation(t *testing.T) {
	oldKey, newKey := secrets.GenerateKey(), secrets.GenerateKey()
	before, _ := secrets.NewSealer(oldKey)
	sealed, _ := before.Seal([]byte("x"), "a")
	after, err := secrets.NewSealer(newKey, oldKey)
	require.NoError(t, err)
	pt, err := after.Open(sealed, "a")
	require.NoError(t, err)
	assert.Equal(t, "x", string(pt))
	fresh, _ := after.Seal([]byte("y"), "a")
	assert.Contains(t, fresh, after.ActiveKeyID())
	assert.NotEqual(t, before.ActiveKeyID(), after.ActiveKeyID())
}

func TestSealerRejectsBadKeys(t *testing.T) {
	for _, k := range []string{"", "c2hvcnQ=", "not base64!"} {
		_, err := secrets.NewSealer(k)
		assert.Error(t, err, k)
	}
}

var cheap = secrets.Params{MemoryKiB: 1024, Iterations: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

func TestHashAndVerify(t *testing.T) {
	h := secrets.NewHasher(2)
	ctx := context.Background()
	enc, err := h.Hash(ctx, "correct horse")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(enc, "$argon2id$v=19$m=19456,t=2,p=1$"), "OWASP parameters")
	ok, err := h.Verify(ctx, "correct horse", enc)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, _ = h.Verify(ctx, "correct horsE", enc)
	assert.False(t, ok)
	enc2, _ := h.Hash(ctx, "correct horse")
	assert.NotEqual(t, enc, enc2, "salted")
	assert.False(t, h.NeedsRehash(enc))
	assert.True(t, secrets.NewHasherWithParams(cheap, 1).NeedsRehash(enc))

	for _, bad := range []string{"", "$argon2i$v=19$m=1,t=1,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA", "$argon2id$v=19$m=x$a$b", "plain"} {
		_, err := h.Verify(ctx, "x", bad)
		assert.ErrorIs(t, err, secrets.ErrBadHash, bad)
	}
	// A corrupted or hostile row cannot make one login cost seconds and gigabytes: parameters
	// past RFC 9106's recommendations are refused before any hashing.
	const salt, key = "c2FsdHNhbHRzYWx0c2FsdA", "aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g"
	for _, params := range []string{"m=262144,t=1,p=1", "m=65536,t=64,p=1", "m=19456,t=2,p=255", "m=4,t=1,p=1"} {
		_, err := h.Verify(ctx, "x", "$argon2id$v=19$"+params+"$"+salt+"$"+key)
		assert.ErrorIs(t, err, secrets.ErrBadHash, params) // refused by decode, before any hashing
	}
	ok, err = h.Verify(ctx, "x", "$argon2id$v=19$m=65536,t=3,p=4$"+salt+"$"+key)
	require.NoError(t, err, "RFC 9106's second recommendation is accepted")
	assert.False(t, ok)
}

func TestHashesInFlightAreBounded(t *testing.T) {
	h := secrets.NewHasherWithParams(cheap, 2)
	var max atomic.Int32
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
				if n := int32(h.InFlight()); n > max.Load() {
					max.Store(n)
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = h.Hash(context.Background(), "pw") }()
	}
	wg.Wait()
	close(stop)
	assert.LessOrEqual(t, max.Load(), int32(2))
	assert.Positive(t, max.Load())

	// A waiting caller gives up with its context.
	slow := secrets.NewHasher(1)
	go func() { _, _ = slow.Hash(context.Background(), "occupies the only slot") }()
	time.Sleep(5 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	for slow.InFlight() == 0 {
		time.Sleep(time.Millisecond)
	}
	_, err := slow.Hash(ctx, "waits")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestCommonPasswords(t *testing.T) {
	assert.GreaterOrEqual(t, secrets.CommonCount(), 10000)
	for _, p := range []string{"password", "Password", "123456", "qwerty123", "iloveyou"} {
		assert.True(t, secrets.IsCommon(p), p)
	}
	assert.False(t, secrets.IsCommon(secrets.RandomPassword()))
}

func TestRandomCredentials(t *testing.T) {
	p := secrets.RandomPassword()
	assert.Len(t, p, 32)
	assert.Regexp(t, `^[A-Za-z0-9]+$`, p)
	assert.NotEqual(t, p, secrets.RandomPassword())
	assert.Len(t, secrets.RandomToken(32), 43)
}

func BenchmarkHash(b *testing.B) {
	h := secrets.NewHasher(0)
	for i := 0; i < b.N; i++ {
		_, _ = h.Hash(context.Background(), "benchmark password")
	}
}
