package secrets_test

import (
	"context"
	"testing"

	"provisioner/platform/secrets"
)

// FuzzOpen: malformed or tampered sealed values are refused, never panic, never decrypt.
func FuzzOpen(f *testing.F) {
	s, _ := secrets.NewSealer("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	sealed, _ := s.Seal([]byte("secret"), "aad")
	f.Add(sealed)
	f.Add("v1..")
	f.Add("v1.00000000.AAAA")
	f.Fuzz(func(t *testing.T, in string) {
		pt, err := s.Open(in, "aad")
		if err == nil && in != sealed && string(pt) != "secret" {
			t.Fatalf("opened a value it never sealed: %q", in)
		}
	})
}

// FuzzVerifyHash: any stored string is either a valid argon2id hash or ErrBadHash; no panic.
func FuzzVerifyHash(f *testing.F) {
	h := secrets.NewHasherWithParams(secrets.Params{MemoryKiB: 64, Iterations: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, 1)
	f.Add("$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g")
	f.Add("$argon2id$v=19$m=4294967295,t=1,p=1$c2FsdA$aGFzaA")
	f.Add("")
	f.Fuzz(func(t *testing.T, enc string) {
		_, _ = h.Verify(context.Background(), "pw", enc)
	})
}
