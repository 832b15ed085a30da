package authn_test

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/authn"
)

// TestParseRefusesCriticalExtensions: RFC 7515 §4.1.11, a token whose header lists critical
// extensions is refused, since this service understands none, even signed with our key.
func TestParseRefusesCriticalExtensions(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	tokens, err := authn.NewTokens(authn.Options{Key: key, Issuer: "i", Audience: "a", Expiry: time.Hour})
	require.NoError(t, err)
	now := time.Now()
	claims := jwt.MapClaims{"sub": "1", "iss": "i", "aud": "a", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	sign := func(crit any) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
		if crit != nil {
			tok.Header["crit"] = crit
		}
		s, err := tok.SignedString(key)
		require.NoError(t, err)
		return s
	}
	_, err = tokens.Parse(sign(nil))
	require.NoError(t, err, "the same token without crit is accepted")
	for _, crit := range []any{[]string{"exp"}, []string{"x"}, []string{}, "x"} {
		_, err := tokens.Parse(sign(crit))
		assert.Error(t, err, "crit %v", crit)
	}
}
