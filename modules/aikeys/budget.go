package aikeys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"provisioner/platform/fault"
	"provisioner/platform/httpx"
)

// Budget periods of a key.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
	PeriodNone  = "none"
)

// Budgets keeps what each budgeted key spent in its period in Redis, shared by every replica. A
// request reserves its worst case (its prompt's estimate plus its capped max_tokens for each
// choice, and one request) before it is sent, in one Lua script (one round trip) that refuses
// when either budget would be passed; when it ends the reservation is settled to the upstream's
// reported usage (or released when the upstream failed), in the background. A key without a
// budget never reaches Redis.
type Budgets struct {
	rc     *redis.Client
	prefix string
	log    *slog.Logger

	settles sync.WaitGroup // settlements in flight
}

// NewBudgets builds the budgets; rc may be nil (a budgeted key is then refused: 503).
func NewBudgets(rc *redis.Client, keyPrefix string, log *slog.Logger) *Budgets {
	return &Budgets{rc: rc, prefix: keyPrefix + ":aibudget:", log: log}
}

// reserveScript reserves ARGV[3] tokens and one request of KEYS[1] (a hash: t tokens, r
// requests) unless that passes the token budget ARGV[1] or the request budget ARGV[2] (0: none).
// ARGV[4] is the key's expiry (unix seconds; 0: none). It answers {refused: 0 none, 1 tokens,
// 2 requests; tokens; requests} as they are after the call.
var reserveScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 't', 'r')
local t = tonumber(v[1]) or 0
local r = tonumber(v[2]) or 0
local tb, rb, need = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if rb > 0 and r + 1 > rb then return {2, t, r} end
if tb > 0 and t + need > tb then return {1, t, r} end
t = redis.call('HINCRBY', KEYS[1], 't', need)
r = redis.call('HINCRBY', KEYS[1], 'r', 1)
if tonumber(ARGV[4]) > 0 then redis.call('EXPIREAT', KEYS[1], ARGV[4]) end
return {0, t, r}
`)

// settleScript adds ARGV[1] tokens and ARGV[2] requests to KEYS[1], when it still exists (a
// period that ended is not brought back without its expiry).
var settleScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 't', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'r', ARGV[2])
return 1
`)

// periodOf answers the Redis key suffix of the period holding now and when that period ends
// (zero for PeriodNone), in UTC.
func periodOf(period string, now time.Time) (string, time.Time) {
	now = now.UTC()
	switch period {
	case PeriodDay:
		start := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
		return "d" + start.Format("20060102"), start.AddDate(0, 0, 1)
	case PeriodMonth:
		start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
		return "m" + start.Format("200601"), start.AddDate(0, 1, 0)
	}
	return "all", time.Time{}
}

// hold is a reservation of a budgeted key; settle or release it once (nil: no budget).
type hold struct {
	b      *Budgets
	key    string
	tokens int64
	done   atomic.Bool
}

// Reserve reserves worst tokens and one request of p's budgets, or refuses: 429 naming the budget
// with Retry-After at the period's end (a day for a budget without period), or 503 when Redis
// cannot be reached. A key without budget gets nil and costs nothing.
func (b *Budgets) Reserve(ctx context.Context, p Principal, worst int64) (*hold, error) {
	pol := p.Policy
	if pol.TokenBudget <= 0 && pol.RequestBudget <= 0 {
		return nil, nil
	}
	if b == nil || b.rc == nil {
		return nil, httpx.Unavailable("The key's budget cannot be checked (no Redis); try again")
	}
	now := time.Now()
	tag, end := periodOf(pol.BudgetPeriod, now)
	key := b.prefix + strconv.FormatInt(p.KeyID, 10) + ":" + tag
	expire := int64(0)
	if !end.IsZero() {
		expire = end.Add(24 * time.Hour).Unix() // late settlements still find it
	}
	res, err := reserveScript.Run(ctx, b.rc, []string{key}, pol.TokenBudget, pol.RequestBudget, worst, expire).Int64Slice()
	if err != nil || len(res) != 3 {
		b.log.Warn("AI key budget unavailable", "keyId", p.KeyID, "error", fmt.Sprint(err))
		return nil, httpx.Unavailable("The key's budget cannot be checked; try again")
	}
	if res[0] == 0 {
		return &hold{b: b, key: key, tokens: worst}, nil
	}
	wait := 24 * time.Hour
	span := "in total (budgetPeriod none)"
	if !end.IsZero() {
		wait = end.Sub(now)
		span = "this " + pol.BudgetPeriod + " (UTC)"
	}
	msg := fmt.Sprintf("Request budget of this key reached: %d requests %s", pol.RequestBudget, span)
	if res[0] == 1 {
		msg = fmt.Sprintf("Token budget of this key reached: %d tokens %s, %d left; this request may use up to %d (lower max_tokens)",
			pol.TokenBudget, span, max(pol.TokenBudget-res[1], 0), worst)
	}
	return nil, fault.TooMany(msg, wait)
}

// settle turns the reservation into used tokens (the upstream's reported usage), in the background.
func (h *hold) settle(used int64) {
	if h != nil && h.done.CompareAndSwap(false, true) {
		h.b.adjust(h.key, used-h.tokens, 0)
	}
}

// release gives the reservation back (the upstream did not answer a generation).
func (h *hold) release() {
	if h != nil && h.done.CompareAndSwap(false, true) {
		h.b.adjust(h.key, -h.tokens, -1)
	}
}

// adjust applies a settlement in the background; Wait waits for those in flight.
func (b *Budgets) adjust(key string, tokens, requests int64) {
	if tokens == 0 && requests == 0 {
		return
	}
	b.settles.Add(1)
	go func() {
		defer b.settles.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		for attempt := 0; attempt < 3; attempt++ {
			if err = settleScript.Run(ctx, b.rc, []string{key}, tokens, requests).Err(); err == nil || errors.Is(err, context.DeadlineExceeded) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			b.log.Warn("AI key budget settlement lost", "key", key, "tokens", tokens, "requests", requests, "error", err.Error())
		}
	}()
}

// Wait waits for the settlements in flight (at shutdown, and in tests).
func (b *Budgets) Wait() { b.settles.Wait() }

// Spent answers what p's key spent in the current period: tokens and requests (settled and reserved).
func (b *Budgets) Spent(ctx context.Context, keyID int64, period string) (tokens, requests int64, err error) {
	tag, _ := periodOf(period, time.Now())
	v, err := b.rc.HMGet(ctx, b.prefix+strconv.FormatInt(keyID, 10)+":"+tag, "t", "r").Result()
	if err != nil {
		return 0, 0, err
	}
	n := func(x any) int64 { s, _ := x.(string); i, _ := strconv.ParseInt(s, 10, 64); return i }
	return n(v[0]), n(v[1]), nil
}

// promptEstimate is a prompt's worst-case estimate in tokens from its size in bytes: half a token
// per byte, plus the chat template's overhead.
func promptEstimate(bytes int) int64 { return int64(bytes/2) + 16 }
