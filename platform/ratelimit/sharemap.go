package ratelimit

import (
	"hash/maphash"
	"sync"
	"time"
)

// shareShards is the number of locks the shares of one limit are spread over.
const shareShards = 32

// shareTable holds this replica's shares of one limit, one per key, in shards of plain maps
// (one is kept per user signed in, so they are compact): a key that is the decimal text of a
// non-negative integer (a user id) is held as that integer, any other key as its text.
type shareTable struct {
	seed   maphash.Seed
	shards [shareShards]shareShard
}

type shareShard struct {
	mu    sync.RWMutex
	byInt map[int64]*share
	byStr map[string]*share
}

func newShareTable() *shareTable {
	t := &shareTable{seed: maphash.MakeSeed()}
	for i := range t.shards {
		t.shards[i] = shareShard{byInt: map[int64]*share{}, byStr: map[string]*share{}}
	}
	return t
}

// decimalKey is key as an integer when key is the canonical decimal text of one (no sign, no
// leading zero, at most 18 digits: never overflows), so that the integer gives back key.
func decimalKey(key string) (int64, bool) {
	if len(key) == 0 || len(key) > 18 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	var n int64
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func (t *shareTable) shard(key string) (*shareShard, int64, bool) {
	if n, ok := decimalKey(key); ok {
		return &t.shards[uint64(n)*0x9E3779B97F4A7C15>>59], n, true
	}
	return &t.shards[maphash.String(t.seed, key)%shareShards], 0, false
}

// get is key's share, added empty when there is none.
func (t *shareTable) get(key string) *share {
	s, n, isInt := t.shard(key)
	s.mu.RLock()
	sh := s.lookup(key, n, isInt)
	s.mu.RUnlock()
	if sh != nil {
		return sh
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh = s.lookup(key, n, isInt); sh == nil {
		sh = &share{}
		if isInt {
			s.byInt[n] = sh
		} else {
			s.byStr[key] = sh
		}
	}
	return sh
}

func (s *shareShard) lookup(key string, n int64, isInt bool) *share {
	if isInt {
		return s.byInt[n]
	}
	return s.byStr[key]
}

// remove takes key's share out of the table and returns it (nil when there was none).
func (t *shareTable) remove(key string) *share {
	s, n, isInt := t.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.lookup(key, n, isInt)
	if sh != nil {
		if isInt {
			delete(s.byInt, n)
		} else {
			delete(s.byStr, key)
		}
	}
	return sh
}

// dropEnded removes the shares whose window ended before now (those not in use at the moment).
func (t *shareTable) dropEnded(now time.Time) {
	ended := func(sh *share) bool {
		if !sh.mu.TryLock() {
			return false
		}
		defer sh.mu.Unlock()
		return now.UnixNano() > sh.end
	}
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		for k, sh := range s.byInt {
			if ended(sh) {
				delete(s.byInt, k)
			}
		}
		for k, sh := range s.byStr {
			if ended(sh) {
				delete(s.byStr, k)
			}
		}
		s.mu.Unlock()
	}
}
