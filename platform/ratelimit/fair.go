package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Outbound is a budget for the calls to one provider: a limit of l (Name, Key), served to the
// owners of the calls waiting for it in turn (FairQueue, the owner from WithOwner). Take waits for
// the limit's next window up to MaxWait; past that it gives up with a *SpentError.
type Outbound struct {
	Limiter   *Limiter
	Name, Key string
	// What names the budget in errors ("the DNS outbound budget").
	What    string
	MaxWait time.Duration
	fair    *FairQueue
}

// SpentError is Outbound.Take's answer when the budget is spent for longer than MaxWait.
type SpentError struct{ Until time.Time }

func (e *SpentError) Error() string {
	return "budget spent until " + e.Until.UTC().Format(time.RFC3339)
}

// Take takes one call's slot for ctx's owner.
func (o *Outbound) Take(ctx context.Context) error {
	if o.fair == nil {
		panic("ratelimit: Outbound used without NewOutbound")
	}
	return o.fair.Do(ctx, OwnerOf(ctx), func() error {
		for {
			r, err := o.Limiter.Take(ctx, o.Name, o.Key)
			if err != nil || !r.Reached {
				return err
			}
			wait := max(time.Until(r.Reset), 50*time.Millisecond)
			if wait > o.MaxWait {
				return &SpentError{Until: r.Reset}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("waiting for %s: %w", o.What, ctx.Err())
			case <-time.After(wait):
			}
		}
	})
}

// NewOutbound is o ready to use.
func NewOutbound(o Outbound) *Outbound {
	o.fair = NewFairQueue()
	return &o
}

// FairQueue hands an outbound budget (Outbound) to the provider calls waiting for it one at a time, taking
// users in turn: a call waits behind at most one call of each other user with calls waiting, so
// one user's queued work delays another user's call by at most one budget slot per user. Calls
// of one user keep their order. The turn is held while its call consults the budget (and waits for
// the budget's next window), and given on as soon as the call has its slot or gives up.
type FairQueue struct {
	mu      sync.Mutex
	held    bool
	waiting map[int64][]chan struct{} // by user: the calls waiting for the turn, in order
	ring    []int64                   // users with calls waiting, in turn order
}

// NewFairQueue is an empty queue.
func NewFairQueue() *FairQueue { return &FairQueue{waiting: map[int64][]chan struct{}{}} }

// Do runs take when it is the turn of user's call, and gives the turn on when take returns.
// A call whose ctx ends while it waits leaves the queue with ctx's error.
func (q *FairQueue) Do(ctx context.Context, user int64, take func() error) error {
	ch := make(chan struct{})
	q.mu.Lock()
	if len(q.waiting[user]) == 0 {
		q.ring = append(q.ring, user)
	}
	q.waiting[user] = append(q.waiting[user], ch)
	if !q.held {
		q.passLocked()
	}
	q.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		q.mu.Lock()
		select {
		case <-ch: // the turn came meanwhile: give it on
			q.passLocked()
		default:
			q.removeLocked(user, ch)
		}
		q.mu.Unlock()
		return ctx.Err()
	}
	defer func() {
		q.mu.Lock()
		q.passLocked()
		q.mu.Unlock()
	}()
	return take()
}

// passLocked gives the turn to the first call of the next user in the ring, or frees it.
func (q *FairQueue) passLocked() {
	q.held = false
	if len(q.ring) == 0 {
		return
	}
	user := q.ring[0]
	q.ring = q.ring[1:]
	calls := q.waiting[user]
	next := calls[0]
	if len(calls) > 1 {
		q.waiting[user] = calls[1:]
		q.ring = append(q.ring, user)
	} else {
		delete(q.waiting, user)
	}
	q.held = true
	close(next)
}

func (q *FairQueue) removeLocked(user int64, ch chan struct{}) {
	calls := q.waiting[user]
	for i, c := range calls {
		if c == ch {
			calls = append(calls[:i:i], calls[i+1:]...)
			break
		}
	}
	if len(calls) > 0 {
		q.waiting[user] = calls
		return
	}
	delete(q.waiting, user)
	for i, u := range q.ring {
		if u == user {
			q.ring = append(q.ring[:i:i], q.ring[i+1:]...)
			break
		}
	}
}

// ownerKey marks the context of calls made for an owner.
type ownerKey struct{}

// WithOwner returns ctx whose calls queue for an Outbound budget as user's.
func WithOwner(ctx context.Context, user int64) context.Context {
	return context.WithValue(ctx, ownerKey{}, user)
}

// OwnerOf is the user ctx's calls are made for; 0 when none was said.
func OwnerOf(ctx context.Context) int64 {
	u, _ := ctx.Value(ownerKey{}).(int64)
	return u
}
