package databases

import (
	"context"
	"time"

	"provisioner/platform/fault"
)

// engineWaits bounds the requests of this process that wait for a tenant engine while holding a
// control database connection (a database's transitions, an access credential's change), so a
// hung engine cannot take the whole control pool. A request past the bound waits for a slot at most
// engineSlotWait, holding no connection, then is refused (503 with Retry-After) before it has
// stored or locked anything.
type engineWaits chan struct{}

func newEngineWaits(n int) engineWaits { return make(engineWaits, max(n, 1)) }

// engineBusyRetryAfter is the Retry-After of a request refused for want of a slot: a slot frees
// when an engine answers or, when the engine hangs, at the latest after engineTimeout.
const engineBusyRetryAfter = 5 * time.Second

// errEngineBusy is the message of that refusal.
const errEngineBusy = "Too many requests are waiting for the database engines; nothing was changed, try again after Retry-After seconds"

// engineSlotWait is how long a request waits for a slot: a burst against engines that answer
// is queued, not refused; against a hung engine the request is refused soon. A variable for the
// crowd benchmark only (SetEngineSlotWait).
var engineSlotWait = time.Second

// acquire takes a slot, waiting at most engineSlotWait; release gives it back. A bound that stays
// full is a 503.
func (w engineWaits) acquire(ctx context.Context) (release func(), err error) {
	if release, ok := w.await(ctx); ok {
		return release, nil
	}
	return nil, engineBusy()
}

// engineBusy is the 503 of a request refused for want of a slot.
func engineBusy() error {
	return fault.Unavailable(errEngineBusy).WithRetryAfter(engineBusyRetryAfter)
}

// await takes a slot when one is free within engineSlotWait (and before ctx ends).
func (w engineWaits) await(ctx context.Context) (release func(), ok bool) {
	t := time.NewTimer(engineSlotWait)
	defer t.Stop()
	select {
	case w <- struct{}{}:
		return func() { <-w }, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}
