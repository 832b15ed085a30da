// Package secrets seals secrets at rest (AES-256-GCM with rotating keys), hashes passwords
// (argon2id at the OWASP parameters, with a bounded number of hashes in flight) and generates
// random credentials.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Sealing errors. None of them carries plaintext or key material.
var (
	ErrMalformed  = errors.New("sealed value is malformed")
	ErrUnknownKey = errors.New("sealed value names an unknown key")
	ErrDecrypt    = errors.New("sealed value does not decrypt (wrong key or tampered)")
)

// Sealer encrypts and decrypts small secrets. The active key seals; every configured key opens,
// so keys can rotate: add the new key as active and keep the old one in the previous list.
type Sealer struct {
	active string
	aeads  map[string]cipher.AEAD
}

// NewSealer builds a Sealer. active and previous are base64 (standard encoding) of 32 bytes each.
func NewSealer(active string, previous ...string) (*Sealer, error) {
	s := &Sealer{aeads: map[string]cipher.AEAD{}}
	for i, k := range append([]string{active}, previous...) {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k))
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("encryption key %d: must be base64 of exactly 32 bytes", i)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("encryption key %d: %w", i, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("encryption key %d: %w", i, err)
		}
		sum := sha256.Sum256(raw)
		kid := hex.EncodeToString(sum[:4])
		if i == 0 {
			s.active = kid
		}
		s.aeads[kid] = aead
	}
	return s, nil
}

// ActiveKeyID names the key that seals.
func (s *Sealer) ActiveKeyID() string { return s.active }

// Seal encrypts plaintext bound to aad (e.g. "database:42"): "v1.<kid>.<base64url(nonce|ct)>".
func (s *Sealer) Seal(plaintext []byte, aad string) (string, error) {
	aead := s.aeads[s.active]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal: %w", err)
	}
	out := aead.Seal(nonce, nonce, plaintext, []byte(aad))
	return "v1." + s.active + "." + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts a value sealed with any configured key and the same aad.
func (s *Sealer) Open(sealed, aad string) ([]byte, error) {
	parts := strings.Split(sealed, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return nil, ErrMalformed
	}
	aead, ok := s.aeads[parts[1]]
	if !ok {
		return nil, ErrUnknownKey
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, ErrMalformed
	}
	pt, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(aad))
	if err != nil {
		return nil, ErrDecrypt
	}
	return pt, nil
}

// GenerateKey returns base64 of 32 random bytes, for tooling.
func GenerateKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.StdEncoding.EncodeToString(b[:])
}

// RandomToken returns nBytes of randomness as base64url (no padding).
func RandomToken(nBytes int) string {
	b := make([]byte, nBytes)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// RandomPassword returns 32 characters of [A-Za-z0-9] (about 190 bits), safe in URLs and DSNs.
func RandomPassword() string { return RandomString(32) }

// RandomString returns n characters of [A-Za-z0-9], uniformly chosen.
func RandomString(n int) string {
	out := make([]byte, n)
	buf := make([]byte, n*2)
	for i := 0; i < n; {
		_, _ = rand.Read(buf)
		for _, b := range buf {
			if int(b) >= 256-256%len(alnum) { // reject to keep the distribution uniform
				continue
			}
			out[i] = alnum[int(b)%len(alnum)]
			i++
			if i == n {
				break
			}
		}
	}
	return string(out)
}
