package authn_test

import (
	"strings"
	"testing"
	"time"

	"provisioner/platform/authn"
)

// FuzzParseToken: any input is refused or accepted without panicking, and only tokens this
// service signed are accepted.
func FuzzParseToken(f *testing.F) {
	tokens, err := authn.NewTokens(authn.Options{Key: []byte(strings.Repeat("k", 32)), Issuer: "i", Audience: "a", Expiry: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	good, _ := tokens.Issue(authn.User{ID: 1, Email: "a@b.c", Role: "User", SecurityStamp: 1})
	f.Add(good.Token)
	f.Add("eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiIxIn0.")
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := tokens.Parse(s)
		if err == nil && s != good.Token {
			// Only a re-encoding of the same signed token may pass; its claims must be ours.
			if c.Issuer != "i" || c.Subject == "" {
				t.Fatalf("accepted a foreign token %q", s)
			}
		}
	})
}
