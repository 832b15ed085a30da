package dns

import (
	"context"
	"fmt"
	"io"
	"log/slog"
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
// at a time in turn. While 200 creates of one user wait for the budget, another user's create (a
// lookup, then the create) passes after at most one call of the first user per call of its own:
// counted in provider calls, not seconds, it completes within a few budget slots.
func TestOneUsersQueueDoesNotHoldUpAnother(t *testing.T) {
	fake := cloudflaretest.New("zone1", "tok", "example.com")
	t.Cleanup(fake.Close)
	client, err := newClient(&config.Config{}, Config{BaseUrl: fake.URL, ZoneId: "zone1", ApiToken: "tok", ZoneName: "example.com",
		TimeoutSeconds: 30, OutboundRate: "2-S"}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)

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

	before := fake.Calls()
	ctxB := ratelimit.WithOwner(context.Background(), 2)
	_, err = client.Lookup(ctxB, "b.example.com")
	require.NoError(t, err)
	_, err = client.Create(ctxB, cloudflare.Record{Name: "b", Content: "203.0.113.2", TTL: 1})
	require.NoError(t, err)
	during := fake.Calls() - before
	// The second user's 2 calls; before each, the first user's call holding the turn and at most one
	// more of its calls (round robin); and the calls it had been given a slot for but not yet sent
	// when the second user came (one window: 2).
	assert.LessOrEqual(t, during, int64(8), "provider calls while the second user's create waited")
	assert.Less(t, fake.Creates(), int64(100), "the first user's queue was still long")
}
