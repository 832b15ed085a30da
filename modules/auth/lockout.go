package auth

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"provisioner/platform/config"
	"provisioner/platform/fault"
)

// Lockout holds back guessing of a password (key "pw:<email>") or a second factor ("mfa:<user
// id>"): each attempt is counted as a failure before the secret is checked (Begin), atomically; a
// success forgets the failures. Past Auth:LockoutThreshold each attempt must wait a doubling delay
// (from Auth:LockoutDelaySeconds, at most Auth:LockoutWindowMinutes), and one sent earlier is a 429
// neither checked nor counted. Counts live in Redis (one Lua script per attempt), in process while
// Redis fails, as the rate limits do.
type Lockout struct {
	rc        *redis.Client
	prefix    string
	threshold int
	window    time.Duration
	base      time.Duration // the first delay
	log       *slog.Logger

	downUntil atomic.Int64 // unix nanos before which Redis is not tried
	down      atomic.Bool  // Redis is considered down (for the logged transitions)
	mu        sync.Mutex
	mem       map[string]*lockState
}

// lockoutRetry is how long a failing Redis is left alone before it is tried again.
const lockoutRetry = 5 * time.Second

type lockState struct {
	failures int
	until    time.Time // no attempt before
	expires  time.Time
}

// NewLockout builds the lockout; rc may be nil (in-process counts only).
func NewLockout(rc *redis.Client, platform *config.Config, cfg Config, log *slog.Logger) *Lockout {
	return &Lockout{rc: rc, prefix: platform.Redis.KeyPrefix + ":lock:", threshold: cfg.Auth.LockoutThreshold,
		window: time.Duration(cfg.Auth.LockoutWindowMinutes) * time.Minute, base: time.Duration(cfg.Auth.LockoutDelaySeconds) * time.Second,
		log: log, mem: map[string]*lockState{}}
}

// Attempt is an attempt Begin let through.
type Attempt struct {
	l   *Lockout
	key string
	// Failures is the number of failures counted, this attempt's included.
	Failures int
	// Delay is the wait this attempt imposes on the next one when it fails (0 below the threshold).
	Delay time.Duration
}

// lockoutScript counts one attempt of KEYS[1] unless one is not allowed yet. ARGV: threshold,
// window ms, base delay ms, maximum delay ms. It answers {admitted 0|1, failures, ms}: the delay
// set when admitted, the time left to wait when not.
var lockoutScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('HMGET', KEYS[1], 'n', 'u')
local n = tonumber(v[1]) or 0
local u = tonumber(v[2]) or 0
if now < u then return {0, n, u - now} end
n = n + 1
local threshold = tonumber(ARGV[1])
local delay = 0
if n >= threshold then
  delay = math.min(tonumber(ARGV[3]) * 2 ^ math.min(n - threshold, 40), tonumber(ARGV[4]))
  delay = math.floor(delay)
end
redis.call('HSET', KEYS[1], 'n', n, 'u', now + delay)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + delay)
return {1, n, delay}
`)

// errLocked is the refusal of an attempt sent before its delay ended; the same for every key, so
// it tells nothing about whether an account exists.
func errLocked(wait time.Duration) error {
	secs := int(math.Ceil(wait.Seconds()))
	return fault.TooMany(fmt.Sprintf("Too many failed attempts; try again in %d s", max(secs, 1)), wait)
}

// Begin counts an attempt at key as failed, before its check runs, or refuses it (429 with
// Retry-After) while the delay of earlier failures lasts.
func (l *Lockout) Begin(ctx context.Context, key string) (*Attempt, error) {
	admitted, failures, ms, err := l.redisBegin(ctx, key)
	if err != nil {
		admitted, failures, ms = l.memBegin(key, time.Now())
	}
	if !admitted {
		return nil, errLocked(time.Duration(ms) * time.Millisecond)
	}
	return &Attempt{l: l, key: key, Failures: failures, Delay: time.Duration(ms) * time.Millisecond}, nil
}

func (l *Lockout) maxDelay() time.Duration { return l.window }

func (l *Lockout) redisBegin(ctx context.Context, key string) (bool, int, int64, error) {
	if l.rc == nil {
		return false, 0, 0, errNoRedis
	}
	if time.Now().UnixNano() < l.downUntil.Load() {
		return false, 0, 0, errNoRedis
	}
	res, err := lockoutScript.Run(ctx, l.rc, []string{l.prefix + key}, l.threshold, l.window.Milliseconds(),
		l.base.Milliseconds(), l.maxDelay().Milliseconds()).Int64Slice()
	if err != nil || len(res) != 3 {
		if ctx.Err() == nil {
			l.markDown(err)
		}
		return false, 0, 0, errNoRedis
	}
	if l.down.CompareAndSwap(true, false) {
		l.log.Info("sign-in lockout counts use Redis again")
	}
	return res[0] == 1, int(res[1]), res[2], nil
}

var errNoRedis = fmt.Errorf("redis not in use")

func (l *Lockout) markDown(err error) {
	l.downUntil.Store(time.Now().Add(lockoutRetry).UnixNano())
	if !l.down.Swap(true) {
		l.log.Warn("sign-in lockout counts fall back to the in-process store (per replica): Redis failed", "error", fmt.Sprint(err))
	}
}

// memBegin is the script's logic on the in-process store.
func (l *Lockout) memBegin(key string, now time.Time) (bool, int, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.mem) > 10_000 {
		for k, st := range l.mem {
			if now.After(st.expires) {
				delete(l.mem, k)
			}
		}
	}
	st := l.mem[key]
	if st == nil || now.After(st.expires) {
		st = &lockState{}
		l.mem[key] = st
	}
	if now.Before(st.until) {
		return false, st.failures, st.until.Sub(now).Milliseconds() + 1
	}
	st.failures++
	var delay time.Duration
	if st.failures >= l.threshold {
		delay = min(l.base<<min(st.failures-l.threshold, 20), l.maxDelay())
	}
	st.until, st.expires = now.Add(delay), now.Add(l.window+delay)
	return true, st.failures, delay.Milliseconds()
}

// Succeeded forgets the failures counted at the attempt's key (the secret was right).
func (a *Attempt) Succeeded(ctx context.Context) {
	l := a.l
	l.mu.Lock()
	delete(l.mem, a.key)
	l.mu.Unlock()
	if l.rc != nil && time.Now().UnixNano() >= l.downUntil.Load() {
		if err := l.rc.Del(ctx, l.prefix+a.key).Err(); err != nil && ctx.Err() == nil {
			l.markDown(err)
		}
	}
}
