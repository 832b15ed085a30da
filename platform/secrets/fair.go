package secrets

import (
	"context"
	"slices"
	"sync"
)

// slots are the Hasher's fixed number of hashing slots, handed out fairly between clients (the
// client address of the request a hash is for): while a slot is free a hash takes it at once;
// once all are taken, hashes wait per client, and each slot released goes to the waiting client
// with the fewest slots in use, clients with as many taking turns in the order they began waiting.
// So one address sending a flood of logins holds at most the slots it held when another address
// began waiting, and that one's hash runs as soon as a slot is released, not after the flood.
type slots struct {
	mu      sync.Mutex
	free    int
	clients map[string]*slotClient
	waiting []*slotClient // clients with hashes waiting, in turn order
	used    int
}

type slotClient struct {
	key      string
	inFlight int
	queue    []*slotWaiter // oldest first
}

type slotWaiter struct {
	ready   chan struct{} // closed once the slot is granted
	granted bool
}

func newSlots(n int) *slots { return &slots{free: n, clients: map[string]*slotClient{}} }

// acquire takes a slot for client key, waiting its turn while none is free; only ctx's end stops
// the wait (ctx.Err, no slot taken).
func (s *slots) acquire(ctx context.Context, key string) error {
	s.mu.Lock()
	c := s.clients[key]
	if c == nil {
		c = &slotClient{key: key}
		s.clients[key] = c
	}
	if s.free > 0 { // a free slot means nobody waits: they would have been given it
		s.free--
		s.used++
		c.inFlight++
		s.mu.Unlock()
		return nil
	}
	w := &slotWaiter{ready: make(chan struct{})}
	c.queue = append(c.queue, w)
	if len(c.queue) == 1 {
		s.waiting = append(s.waiting, c)
	}
	s.mu.Unlock()

	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.granted { // granted meanwhile: hand the slot on
		s.releaseLocked(c)
		s.mu.Unlock()
		return ctx.Err()
	}
	c.queue = slices.DeleteFunc(c.queue, func(x *slotWaiter) bool { return x == w })
	if len(c.queue) == 0 {
		s.waiting = slices.DeleteFunc(s.waiting, func(x *slotClient) bool { return x == c })
	}
	s.forget(c)
	s.mu.Unlock()
	return ctx.Err()
}

// release gives back a slot acquire took for key.
func (s *slots) release(key string) {
	s.mu.Lock()
	s.releaseLocked(s.clients[key])
	s.mu.Unlock()
}

// releaseLocked gives c's slot to the next waiting hash (grant), else frees it.
func (s *slots) releaseLocked(c *slotClient) {
	c.inFlight--
	s.used--
	s.forget(c)
	if len(s.waiting) == 0 {
		s.free++
		return
	}
	s.grant()
}

// grant gives a slot to the oldest hash of the waiting client with the fewest slots in use (the
// first such in turn order), which then goes to the end of the turn order if more of its hashes
// wait.
func (s *slots) grant() {
	best := 0
	for i, c := range s.waiting {
		if c.inFlight < s.waiting[best].inFlight {
			best = i
		}
	}
	c := s.waiting[best]
	w := c.queue[0]
	c.queue[0] = nil
	c.queue = c.queue[1:]
	s.waiting = slices.Delete(s.waiting, best, best+1)
	if len(c.queue) > 0 {
		s.waiting = append(s.waiting, c)
	}
	c.inFlight++
	s.used++
	w.granted = true
	close(w.ready)
}

// forget drops c once it has neither slots nor waiting hashes.
func (s *slots) forget(c *slotClient) {
	if c.inFlight == 0 && len(c.queue) == 0 {
		delete(s.clients, c.key)
	}
}

// inUse is the number of slots taken.
func (s *slots) inUse() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// queued is the number of hashes waiting for a slot.
func (s *slots) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.waiting {
		n += len(c.queue)
	}
	return n
}
