package authn

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// TestCachedUserIsCompact: the guard keeps one cachedUser per user signed in (P11, memory per
// cached user), so it stays at 32 bytes plus one string, and gives back the principal it was made
// from, for either role.
func TestCachedUserIsCompact(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(cachedUser{}), uintptr(32))
	for _, role := range []string{RoleUser, RoleAdmin} {
		u := newCachedUser("ada@example.test", "Ada Lovelace", role, 7)
		assert.Equal(t, Principal{UserID: 42, Email: "ada@example.test", Name: "Ada Lovelace", Role: role}, u.principal(42))
		assert.Equal(t, int64(7), u.stamp)
	}
	empty := newCachedUser("", "", RoleAdmin, 1).principal(1)
	assert.Equal(t, Principal{UserID: 1, Role: RoleAdmin}, empty)
}
