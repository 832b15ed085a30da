package ratelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestShareTableKeysAreExact: keys held as integers and keys held as text never meet; each key
// has one share, until it is removed or its window has ended.
func TestShareTableKeysAreExact(t *testing.T) {
	tb := newShareTable()
	keys := []string{"0", "7", "123", "0123", "+123", "-123", "123 ", "1234567890123456789", "999999999999999999",
		"127.0.0.1", "", "user:123"}
	seen := map[*share]string{}
	for _, k := range keys {
		sh := tb.get(k)
		assert.Same(t, sh, tb.get(k), "key %q", k)
		if other, dup := seen[sh]; dup {
			t.Errorf("keys %q and %q share a share", k, other)
		}
		seen[sh] = k
	}
	n, ok := decimalKey("999999999999999999")
	assert.True(t, ok)
	assert.Equal(t, int64(999999999999999999), n)

	removed := tb.get("123")
	assert.Same(t, removed, tb.remove("123"))
	assert.Nil(t, tb.remove("123"))
	assert.NotSame(t, removed, tb.get("123"))

	live := tb.get("7")
	live.end = time.Now().Add(time.Minute).UnixNano()
	ended := tb.get("0123")
	tb.dropEnded(time.Now())
	assert.Same(t, live, tb.get("7"), "a live window is kept")
	assert.NotSame(t, ended, tb.get("0123"), "an ended one is dropped")
}
