package authn

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVerifiedTokensAreNotParsedAgain: the guard verified the same token on every request of a
// session (a quarter of an authenticated GET's CPU). Once verified, its claims are reused; what the
// reuse must not change: a token that expired meanwhile is refused, a token differing in one byte
// is verified on its own (and refused), and the map stays bounded.
func TestVerifiedTokensAreNotParsedAgain(t *testing.T) {
	tokens, err := NewTokens(Options{Key: []byte(strings.Repeat("k", 32)), Issuer: "i", Audience: "a", Expiry: time.Hour})
	require.NoError(t, err)
	g := NewGuard(tokens, nil, nil)
	var seen []*Claims
	app := fiber.New()
	app.Get("/", func(c *fiber.Ctx) error {
		claims, err := g.claims(c)
		if err != nil {
			return c.Status(401).SendString(err.Error())
		}
		seen = append(seen, claims)
		return c.SendString(claims.Subject)
	})
	call := func(auth string) (int, string) {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Authorization", auth)
		res, err := app.Test(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	issued, err := tokens.Issue(User{ID: 7, Email: "a@example.test", Role: RoleUser})
	require.NoError(t, err)

	for range 3 {
		status, body := call("Bearer " + issued.Token)
		require.Equal(t, 200, status, body)
		assert.Equal(t, "7", body)
	}
	require.Len(t, seen, 3)
	assert.Same(t, seen[0], seen[1], "verified once, then reused")
	assert.Same(t, seen[0], seen[2])

	// One byte changed in the signature: not the cached token, verified and refused.
	tampered := issued.Token[:len(issued.Token)-2] + map[bool]string{true: "A", false: "B"}[issued.Token[len(issued.Token)-2] != 'A'] + issued.Token[len(issued.Token)-1:]
	status, _ := call("Bearer " + tampered)
	assert.Equal(t, 401, status)
	assert.Nil(t, g.verified.get(tampered))

	// Expired since it was verified: refused, and forgotten.
	g.verified.get(issued.Token).ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Minute))
	status, _ = call("Bearer " + issued.Token)
	assert.Equal(t, 401, status)
	assert.Nil(t, g.verified.get(issued.Token))

	// Bounded.
	for i := range maxVerified + 10 {
		g.verified.put(strings.Repeat("x", 8)+string(rune('a'+i%26))+time.Duration(i).String(), &Claims{})
	}
	g.verified.mu.RLock()
	n := len(g.verified.m)
	g.verified.mu.RUnlock()
	assert.LessOrEqual(t, n, maxVerified)
}
