package dns

import (
	"context"
	"sync"
)

// fairQueue hands the outbound budget to the provider calls waiting for it one at a time, taking
// users in turn: a call waits behind at most one call of each other user with calls waiting, so
// one user's queued work delays another user's call by at most one budget slot per user. Calls
// of one user keep their order. The turn is held while its call consults the budget (and waits for
// the budget's next window), and given on as soon as the call has its slot or gives up.
type fairQueue struct {
	mu      sync.Mutex
	held    bool
	waiting map[int64][]chan struct{} // by user: the calls waiting for the turn, in order
	ring    []int64                   // users with calls waiting, in turn order
}

func newFairQueue() *fairQueue { return &fairQueue{waiting: map[int64][]chan struct{}{}} }

// do runs take when it is the turn of user's call, and gives the turn on when take returns.
// A call whose ctx ends while it waits leaves the queue with ctx's error.
func (q *fairQueue) do(ctx context.Context, user int64, take func() error) error {
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
func (q *fairQueue) passLocked() {
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

func (q *fairQueue) removeLocked(user int64, ch chan struct{}) {
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

// ownerKey marks the context of provider calls made for a user's record.
type ownerKey struct{}

// forOwner returns ctx whose provider calls queue for the budget as user's.
func forOwner(ctx context.Context, user int64) context.Context {
	return context.WithValue(ctx, ownerKey{}, user)
}

// ownerOf is the user ctx's provider calls are made for; 0 when none was said.
func ownerOf(ctx context.Context) int64 {
	u, _ := ctx.Value(ownerKey{}).(int64)
	return u
}
