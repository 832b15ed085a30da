package secrets_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/reqctx"
	"provisioner/platform/secrets"
)

func from(addr string) context.Context {
	return reqctx.WithRequest(context.Background(), reqctx.Request{ClientIP: addr, ClientKey: addr})
}

// TestHashQueueIsFairBetweenAddresses: with one slot and one address's flood of hashes queued, a
// second address's hash runs as soon as the hash in flight ends, not behind the flood (a FIFO line
// would put it about twenty places later). The hashes take milliseconds each, so at most the one in
// flight and one whose end was still being recorded finish in between, whatever the machine's load.
func TestHashQueueIsFairBetweenAddresses(t *testing.T) {
	slow := secrets.Params{MemoryKiB: 8192, Iterations: 2, Threads: 1, SaltLen: 16, KeyLen: 32}
	h := secrets.NewHasherWithParams(slow, 1)
	enc, err := h.Hash(context.Background(), "right")
	require.NoError(t, err)
	var mu sync.Mutex
	var order []string
	done := func(who string) { mu.Lock(); order = append(order, who); mu.Unlock() }

	const flood = 24
	var wg sync.WaitGroup
	for i := 0; i < flood; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = h.Verify(from("192.0.2.1"), "wrong", enc); done("A") }()
	}
	// Every flood hash has taken the slot or is queued (Taken counts the first Hash too).
	require.Eventually(t, func() bool { return int(h.Taken())-1+h.Waiting() >= flood }, 30*time.Second, time.Millisecond)
	require.GreaterOrEqual(t, h.Waiting(), flood/2, "the flood is still queued")
	mu.Lock()
	before := len(order)
	mu.Unlock()
	_, err = h.Verify(from("192.0.2.2"), "wrong", enc)
	require.NoError(t, err)
	done("B")
	wg.Wait()

	b := slices.Index(order, "B")
	assert.LessOrEqual(t, b-before, 3, "flood hashes ended while the second address waited: %v", order)
	assert.Len(t, order, flood+1)
	assert.Zero(t, h.InFlight())
	assert.Zero(t, h.Waiting())
}

// TestAWaitingHashGivesUpWithItsContext: a cancelled wait takes no slot, leaks none, and the
// waiters behind it still get theirs.
func TestAWaitingHashGivesUpWithItsContext(t *testing.T) {
	h := secrets.NewHasherWithParams(cheap, 1)
	enc, err := h.Hash(context.Background(), "right")
	require.NoError(t, err)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = h.Verify(from("192.0.2.1"), "wrong", enc) }()
	}
	require.Eventually(t, func() bool { return h.Waiting() > 0 }, 30*time.Second, time.Millisecond)
	ctx, cancel := context.WithCancel(from("192.0.2.2"))
	go func() {
		for h.Waiting() < 2 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err = h.Verify(ctx, "wrong", enc)
	if err != nil {
		assert.ErrorIs(t, err, context.Canceled)
	}
	wg.Wait()
	assert.Zero(t, h.InFlight())
	assert.Zero(t, h.Waiting())
	ok, err := h.Verify(from("192.0.2.2"), "right", enc)
	require.NoError(t, err)
	assert.True(t, ok)
}
