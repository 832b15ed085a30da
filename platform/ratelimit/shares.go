package ratelimit

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/ulule/limiter/v3"
)

// Shares of a window (see the package documentation).
const (
	shareDivisor = 16  // a share is at most this fraction of what is left of the limit
	maxShare     = 256 // and at most this many hits
	minShare     = 2   // smaller shares are not taken: hits are counted one by one
)

// shareScript takes up to ARGV[1] hits of a limit of ARGV[2] for a window of ARGV[3] ms, never
// more than what is left; it counts one hit when nothing is left (a refused hit counts, as in
// ulule's store, whose key layout and window it shares). It returns the hits granted, the count
// after the call and the window's remaining milliseconds.
var shareScript = redis.NewScript(`
local c = tonumber(redis.call("get", KEYS[1]) or "0")
local grant = tonumber(ARGV[2]) - c
if grant > tonumber(ARGV[1]) then grant = tonumber(ARGV[1]) end
if grant < 0 then grant = 0 end
local inc = grant
if inc == 0 then inc = 1 end
local n = redis.call("incrby", KEYS[1], inc)
if n == inc then redis.call("pexpire", KEYS[1], ARGV[3]) end
return {grant, n, redis.call("pttl", KEYS[1])}
`)

// share is this replica's unspent share of one window of one limit for one key (one is kept per
// user signed in: its fields are small and hold no pointer).
type share struct {
	mu    sync.Mutex
	count int64 // the shared count after the share was taken (every replica's hits and shares)
	end   int64 // end of the window, unix nanoseconds
	left  int32 // hits of the share not spent yet (at most two shares of maxShare)
	last  int32 // size of the last share granted
	// refilling: a background fetch of the next share is under way.
	refilling bool
	// dropped: Reset removed this share; a fetch that has not run yet must not take a new one
	// (it would land after the reset and count hits that nobody can spend).
	dropped bool
}

// endTime is the end of the share's window.
func (sh *share) endTime() time.Time { return time.Unix(0, sh.end) }

// takeShared spends one hit of this replica's share of the window, taking a new share from Redis
// when it is spent; ok is false when the hit must be counted one by one instead (few hits left,
// Redis not in use or failing). When a quarter of the share is left, the next one is fetched in
// the background, so a steady stream of hits does not wait for Redis.
func (l *Limiter) takeShared(ctx context.Context, t *shareTable, name, key string, rate limiter.Rate) (Result, bool) {
	sh := t.get(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.dropped { // reset while this hit waited: counted one by one
		return Result{}, false
	}
	now := time.Now()
	if now.UnixNano() >= sh.end {
		sh.left, sh.count, sh.last = 0, 0, 0
		l.sweep(now)
	}
	if sh.left > 0 {
		sh.left--
		if n := l.shareSize(rate, sh.count); !sh.refilling && sh.left <= sh.last/4 && n >= minShare && time.Until(sh.endTime()) > rate.Period/8 {
			sh.refilling = true
			go l.refill(name, key, sh, n, rate)
		}
		return sh.result(name, rate, false), true
	}
	n := l.shareSize(rate, sh.count)
	if n < minShare || l.o.Redis == nil {
		return Result{}, false
	}
	if _, isRedis := l.store(); !isRedis {
		return Result{}, false
	}
	if !l.fetchShare(ctx, name, key, sh, n, rate) {
		return Result{}, false
	}
	if sh.left == 0 {
		return sh.result(name, rate, true), true
	}
	sh.left--
	return sh.result(name, rate, false), true
}

// shareSize is the size of the next share given the last known count (below minShare: none).
func (l *Limiter) shareSize(rate limiter.Rate, count int64) int64 {
	return min(maxShare, (rate.Limit-count)/shareDivisor)
}

// refill fetches the next share in the background.
func (l *Limiter) refill(name, key string, sh *share, n int64, rate limiter.Rate) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	defer func() { sh.refilling = false }()
	if _, isRedis := l.store(); isRedis && !sh.dropped {
		l.fetchShare(ctx, name, key, sh, n, rate)
	}
}

// fetchShare takes up to n hits from Redis into sh (sh.mu held); false when Redis failed.
func (l *Limiter) fetchShare(ctx context.Context, name, key string, sh *share, n int64, rate limiter.Rate) bool {
	start := time.Now()
	out, err := shareScript.Run(ctx, l.o.Redis, []string{l.o.Prefix + ":" + name + ":" + key}, n, rate.Limit, rate.Period.Milliseconds()).Int64Slice()
	if err != nil || len(out) != 3 {
		if err != nil && ctx.Err() == nil {
			l.markDown(err)
		}
		return false
	}
	l.markUp(start.UnixNano())
	granted, count, ttl := out[0], out[1], time.Duration(out[2])*time.Millisecond
	if ttl <= 0 {
		ttl = rate.Period
	}
	end := start.Add(ttl).UnixNano()
	if start.UnixNano() >= sh.end || end > sh.end+int64(rate.Period/2) {
		sh.left, sh.count = 0, 0 // a new window: what was left of the old one is void
	}
	sh.left += int32(granted)
	sh.count, sh.end = max(sh.count, count), end
	if granted > 0 {
		sh.last = int32(granted)
	}
	return true
}

func (sh *share) result(name string, rate limiter.Rate, reached bool) Result {
	remaining := max(0, rate.Limit-sh.count+int64(sh.left))
	if reached {
		remaining = 0
	}
	return Result{Name: name, Limit: rate.Limit, Remaining: remaining, Reached: reached, Period: rate.Period,
		Reset: roundUpReset(sh.endTime(), rate.Period)}
}

// sweep drops the shares of ended windows, at most once a minute.
func (l *Limiter) sweep(now time.Time) {
	next := l.nextSweep.Load()
	if now.UnixNano() < next || !l.nextSweep.CompareAndSwap(next, now.Add(time.Minute).UnixNano()) {
		return
	}
	go func() {
		for _, t := range l.shares {
			t.dropEnded(time.Now())
		}
	}()
}
