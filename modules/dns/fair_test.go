package dns

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/modules/dns/cloudflare"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
	"provisioner/platform/config"
	"provisioner/platform/ratelimit"
)

// TestOneUsersQueueDoesNotHoldUpAnother: the provider budget (Dns:OutboundRate) is served a user
// at a time in turn. While 200 creates of one user wait for the budget, another user's create
// passes after at most a few calls of the first user: counted in provider calls, not seconds.
func TestOneUsersQueueDoesNotHoldUpAnother(t *testing.T) {
	fake := cloudflaretest.New("zone1", "tok", "example.com")
	t.Cleanup(fake.Close)
	client, err := newClient(&config.Config{}, Config{BaseUrl: fake.URL, ZoneId: "zone1", ApiToken: "tok", ZoneName: "example.com",
		TimeoutSeconds: 30, OutboundRate: "2-S"}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	// The first user's creates that reached the provider, and how many had when the second's did.
	var (
		mu               sync.Mutex
		firsts, atSecond int
	)
	fake.SetBeforeCreate(func(name string) {
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(name, "b") {
			atSecond = firsts
		} else {
			firsts++
		}
	})
	firstsSoFar := func() int { mu.Lock(); defer mu.Unlock(); return firsts }

	ctxA, stopA := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = client.Create(ratelimit.WithOwner(ctxA, 1), cloudflare.Record{Name: fmt.Sprintf("a%d", i), Content: "203.0.113.1", TTL: 1})
		}()
	}
	t.Cleanup(func() { stopA(); wg.Wait() })
	// The first user's calls are queued and the budget spent: its calls trickle at the budget's pace.
	require.Eventually(t, func() bool { return fake.Calls() >= 3 }, time.Minute, 10*time.Millisecond)

	ctxB := ratelimit.WithOwner(context.Background(), 2)
	start := firstsSoFar()
	_, err = client.Lookup(ctxB, "b.example.com")
	require.NoError(t, err)
	before := firstsSoFar()
	_, err = client.Create(ctxB, cloudflare.Record{Name: "b", Content: "203.0.113.2", TTL: 1})
	require.NoError(t, err)
	mu.Lock()
	passed, whole := atSecond-before, atSecond-start
	mu.Unlock()
	// Between the second user's lookup and its create reaching the provider: the calls of the
	// first user given a slot but not yet sent (one window: 2), the one holding the turn and at
	// most one more (round robin). The time the calls spend on their way is not counted, so a
	// slow machine does not add to it.
	assert.LessOrEqual(t, passed, 4, "the first user's creates before the second user's")
	// The lookup waits its turn too: a queue served in order would have it wait for every
	// create of the first user's (about 200).
	assert.LessOrEqual(t, whole, 12, "the first user's creates before the second user's lookup and create")
	assert.Less(t, fake.Creates(), int64(100), "the first user's queue was still long")
}
