package auth_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"golang.org/x/text/unicode/norm"

	"provisioner/app/apptest"
	"provisioner/platform/secrets"
	"provisioner/platform/testutil"
)

// Spellings of one password as different devices send it: "é" as one code point (NFC) or as "e"
// followed by U+0301 (NFD), and fullwidth letters against ASCII ones.
const (
	composedPassword   = "caf\u00e9-kettle-harbour-91"
	decomposedPassword = "cafe\u0301-kettle-harbour-91"
	fullwidthPassword  = "\uff56\uff49\uff4f\uff4c\uff45\uff54-kettle-harbour-91" // ｖｉｏｌｅｔ
	asciiPassword      = "violet-kettle-harbour-91"
)

func registerWith(t *testing.T, a *apptest.App, password string) string {
	t.Helper()
	addr := email()
	r := a.Post("/api/auth/register", "", map[string]any{"fullName": "Norm Test", "email": addr, "password": password})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	return addr
}

func loginStatus(a *apptest.App, addr, password string) int {
	return a.Post("/api/auth/login", "", map[string]any{"email": addr, "password": password}).Status
}

// A password is one password however the device spells it: registered with "é" as one code point,
// it signs in with "e" + U+0301 and the other way round; registered with fullwidth letters, it
// signs in with ASCII ones and the other way round.
func TestPasswordSignsInWhicheverUnicodeSpelling(t *testing.T) {
	require.NotEqual(t, composedPassword, decomposedPassword)
	require.Equal(t, norm.NFC.String(decomposedPassword), composedPassword)
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Register": "1000-M", "RateLimit:Login": "1000-M", "RateLimit:LoginPerIp": "1000-M"}))
	for _, tc := range []struct{ name, registered, typed string }{
		{"composed, then decomposed", composedPassword, decomposedPassword},
		{"decomposed, then composed", decomposedPassword, composedPassword},
		{"fullwidth, then ASCII", fullwidthPassword, asciiPassword},
		{"ASCII, then fullwidth", asciiPassword, fullwidthPassword},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := registerWith(t, a, tc.registered)
			assert.Equal(t, http.StatusOK, loginStatus(a, addr, tc.typed), "the other spelling signs in")
			assert.Equal(t, http.StatusOK, loginStatus(a, addr, tc.registered), "the spelling registered signs in")
			assert.Equal(t, http.StatusUnauthorized, loginStatus(a, addr, tc.typed+"x"), "a wrong password is refused")
			assert.Equal(t, http.StatusUnauthorized, loginStatus(a, addr, strings.Replace(tc.typed, "kettle", "kettel", 1)),
				"a wrong password is refused")
		})
	}

	// A reset stores the normalised form too.
	t.Run("reset", func(t *testing.T) {
		u := a.Register(t)
		tok := secrets.RandomToken(32)
		sum := sha256.Sum256([]byte(tok))
		_, err := a.DB.ExecContext(context.Background(), "INSERT INTO password_reset_tokens (user_id, token_hash, email, expires_at) VALUES (?, ?, ?, ?)",
			u.ID, sum[:], u.Email, time.Now().Add(time.Hour))
		require.NoError(t, err)
		r := a.Post("/api/auth/reset-password", "", map[string]any{"token": tok, "newPassword": fullwidthPassword})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		assert.Equal(t, http.StatusOK, loginStatus(a, u.Email, asciiPassword))
		assert.Equal(t, http.StatusUnauthorized, loginStatus(a, u.Email, u.Password), "the old password is gone")
		assert.Equal(t, http.StatusUnauthorized, loginStatus(a, u.Email, asciiPassword+"x"), "a wrong password is refused")
	})

	// So does an admin's creation of an account.
	t.Run("created by an admin", func(t *testing.T) {
		addr := "made-" + testutil.RandomSuffix() + "@corp.test"
		r := a.Post("/api/users", a.AdminToken(t), map[string]any{"fullName": "Made", "email": addr, "password": decomposedPassword})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
		assert.Equal(t, http.StatusOK, loginStatus(a, addr, composedPassword))
		assert.Equal(t, http.StatusUnauthorized, loginStatus(a, addr, composedPassword+"x"), "a wrong password is refused")
	})

	// And the bootstrap admin's creation from Bootstrap:AdminPassword (on a control database of its
	// own: it adds an Admin).
	t.Run("bootstrap admin", func(t *testing.T) {
		url, drop, err := testutil.CreateDatabase("auth_bootstrap_norm")
		require.NoError(t, err)
		t.Cleanup(drop)
		addr := "root-" + testutil.RandomSuffix() + "@corp.test"
		b := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:Control": url,
			"Bootstrap:AdminEmail": addr, "Bootstrap:AdminPassword": fullwidthPassword}))
		assert.Equal(t, http.StatusOK, loginStatus(b, addr, asciiPassword))
		assert.Equal(t, http.StatusUnauthorized, loginStatus(b, addr, asciiPassword+"x"), "a wrong password is refused")
	})
}

// An account whose stored hash is of a password as typed that is not in NFKC (a legacy hash) still
// signs in with that text; the sign-in replaces the hash by the normalised one, which then also
// accepts the other spellings.
func TestLegacyPasswordHashIsUpgradedAtSignIn(t *testing.T) {
	var hasher *secrets.Hasher
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Login": "1000-M", "RateLimit:LoginPerIp": "1000-M"}), apptest.WithFx(fx.Populate(&hasher)))
	ctx := context.Background()
	for _, tc := range []struct{ name, typed, other string }{
		{"decomposed", decomposedPassword, composedPassword},
		{"fullwidth", fullwidthPassword, asciiPassword},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := a.Register(t)
			legacy, err := hasher.Hash(ctx, tc.typed) // as a pre-upgrade account's was made
			require.NoError(t, err)
			_, err = a.DB.ExecContext(ctx, "UPDATE users SET password_hash = ? WHERE id = ?", legacy, u.ID)
			require.NoError(t, err)
			stored := func() string {
				var h string
				require.NoError(t, a.DB.QueryRowContext(ctx, "SELECT password_hash FROM users WHERE id = ?", u.ID).Scan(&h))
				return h
			}

			assert.Equal(t, http.StatusUnauthorized, loginStatus(a, u.Email, tc.typed+"x"), "a wrong password is refused")
			assert.Equal(t, http.StatusUnauthorized, loginStatus(a, u.Email, u.Password), "the registered password was replaced")
			require.Equal(t, legacy, stored(), "a refused sign-in leaves the hash alone")

			require.Equal(t, http.StatusOK, loginStatus(a, u.Email, tc.typed), "the text as typed still signs in")
			upgraded := stored()
			assert.NotEqual(t, legacy, upgraded, "the sign-in stored a new hash")
			ok, err := hasher.Verify(ctx, norm.NFKC.String(tc.typed), upgraded)
			require.NoError(t, err)
			assert.True(t, ok, "the new hash is the normalised password's")

			assert.Equal(t, http.StatusOK, loginStatus(a, u.Email, tc.other), "the other spelling signs in now")
			assert.Equal(t, http.StatusOK, loginStatus(a, u.Email, tc.typed), "and the first still does")
			assert.Equal(t, http.StatusUnauthorized, loginStatus(a, u.Email, tc.other+"x"), "a wrong password is refused")
			assert.Equal(t, upgraded, stored(), "an upgraded hash is not rehashed again")
		})
	}
}

// The length rule counts the normalised text, so one password passes or fails it however it is
// spelled: a password of 100 "é" (100 code points composed, 200 decomposed) registers composed and
// signs in decomposed (a 400 before: the login's limit of 128 counted the text as sent), while 8
// code points that are 4 characters once composed are too short.
func TestPasswordLengthCountsTheNormalisedText(t *testing.T) {
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Register": "1000-M"}))
	long := strings.Repeat("\u00e9", 100) + "-" + testutil.RandomSuffix()
	addr := registerWith(t, a, long)
	decomposed := norm.NFD.String(long)
	require.Greater(t, len([]rune(decomposed)), 128)
	assert.Equal(t, http.StatusOK, loginStatus(a, addr, decomposed))
	assert.Equal(t, http.StatusUnauthorized, loginStatus(a, addr, norm.NFD.String(strings.Repeat("\u00e9", 101))))

	for name, pw := range map[string]string{
		"4 characters sent decomposed as 8 code points": "e\u0301a\u0301o\u0301u\u0301",
		"129 characters after normalisation":            strings.Repeat("\uff58", 129),                         // fullwidth x
		"a common password in fullwidth letters":        "\uff50\uff41\uff53\uff53\uff57\uff4f\uff52\uff44123", // ｐａｓｓｗｏｒｄ123
		"more than 512 code points as sent":             strings.Repeat("e\u0301", 257),
	} {
		r := a.Post("/api/auth/register", "", map[string]any{"fullName": "A", "email": email(), "password": pw})
		assert.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", name, r.Raw)
		assert.Equal(t, []string{"password"}, r.Fields(), "%s: %s", name, r.Raw)
	}
}

// An unknown email costs the hash work of a wrong password for the same input: a password not in
// NFKC costs a known account two verifications (the normalised text, then the text as typed, for
// hashes made before), so it costs an unknown email two as well.
func TestUnknownEmailCostsTheVerificationsOfAWrongPassword(t *testing.T) {
	var hasher *secrets.Hasher
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Login": "1000-M", "RateLimit:LoginPerIp": "1000-M"}), apptest.WithFx(fx.Populate(&hasher)))
	u := a.Register(t)
	cost := func(addr, password string) uint64 {
		before := hasher.Taken()
		require.Equal(t, http.StatusUnauthorized, loginStatus(a, addr, password))
		return hasher.Taken() - before
	}
	for _, pw := range []string{"wrong-but-plain-ascii", decomposedPassword, fullwidthPassword} {
		known := cost(u.Email, pw)
		unknown := cost(fmt.Sprintf("nobody-%s@example.test", testutil.RandomSuffix()), pw)
		assert.Equal(t, known, unknown, "%q: a known account's wrong password and an unknown email cost the same", pw)
	}
}

// A hash made with other argon2id parameters than the service's (an account from before they were
// raised) is made again with the service's at the next successful sign-in, and only then: a wrong
// password leaves it alone, and the new hash is not replaced again.
func TestPasswordHashWithOldParametersIsRehashedAtSignIn(t *testing.T) {
	var hasher *secrets.Hasher
	a := apptest.Start(t, apptest.With(map[string]any{"RateLimit:Login": "1000-M", "RateLimit:LoginPerIp": "1000-M"}), apptest.WithFx(fx.Populate(&hasher)))
	ctx := context.Background()
	u := a.Register(t)
	weaker := secrets.NewHasherWithParams(secrets.Params{MemoryKiB: 8192, Iterations: 1, Threads: 1, SaltLen: 16, KeyLen: 32}, 1)
	old, err := weaker.HashPassword(ctx, u.Password)
	require.NoError(t, err)
	require.True(t, hasher.NeedsRehash(old), "the test's hash must differ from the service's parameters")
	_, err = a.DB.ExecContext(ctx, "UPDATE users SET password_hash = ? WHERE id = ?", old, u.ID)
	require.NoError(t, err)
	stored := func() string {
		var h string
		require.NoError(t, a.DB.QueryRowContext(ctx, "SELECT password_hash FROM users WHERE id = ?", u.ID).Scan(&h))
		return h
	}

	assert.Equal(t, http.StatusUnauthorized, loginStatus(a, u.Email, u.Password+"x"))
	require.Equal(t, old, stored(), "a refused sign-in leaves the hash alone")

	require.Equal(t, http.StatusOK, loginStatus(a, u.Email, u.Password), "the old hash still signs in")
	renewed := stored()
	assert.NotEqual(t, old, renewed, "the sign-in stored a new hash")
	assert.False(t, hasher.NeedsRehash(renewed), "made with the service's parameters: %.30s…", renewed)
	ok, err := hasher.Verify(ctx, u.Password, renewed)
	require.NoError(t, err)
	assert.True(t, ok, "of the same password")

	require.Equal(t, http.StatusOK, loginStatus(a, u.Email, u.Password))
	assert.Equal(t, renewed, stored(), "a current hash is not made again")
}
