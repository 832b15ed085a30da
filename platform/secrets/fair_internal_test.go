package secrets

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSlotsGoToTheWaitingClientWithFewest: with two slots, one address holding both and more of
// its hashes queued, each slot released goes to the waiting address holding fewer, so the two end
// up with one slot each and then take turns.
func TestSlotsGoToTheWaitingClientWithFewest(t *testing.T) {
	s := newSlots(2)
	ctx := context.Background()
	require.NoError(t, s.acquire(ctx, "A"))
	require.NoError(t, s.acquire(ctx, "A"))
	granted := make(chan string, 8)
	queue := func(key string) {
		n := s.queued()
		go func() {
			if s.acquire(ctx, key) == nil {
				granted <- key
			}
		}()
		require.Eventually(t, func() bool { return s.queued() == n+1 }, 10*time.Second, time.Millisecond)
	}
	next := func() string {
		select {
		case k := <-granted:
			return k
		case <-time.After(10 * time.Second):
			return "none"
		}
	}
	queue("A")
	queue("A")
	queue("A")
	queue("B")
	queue("B")

	s.release("A") // A holds 1, B none: B's turn
	assert.Equal(t, "B", next())
	s.release("A") // A none, B 1: A
	assert.Equal(t, "A", next())
	s.release("B") // A 1, B none: B
	assert.Equal(t, "B", next())
	s.release("A") // A none, B 1: A
	assert.Equal(t, "A", next())
	s.release("B") // only A waits
	assert.Equal(t, "A", next())
	assert.Zero(t, s.queued())
	s.release("A")
	s.release("A")
	assert.Zero(t, s.inUse())
	assert.Empty(t, s.clients, "nothing kept for clients gone")
	assert.Equal(t, 2, s.free)
}
