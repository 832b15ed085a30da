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
)

// Budget periods of a key.
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
	PeriodNone  = "none"
)

// Budgets keeps in Redis what each budgeted key, and each user with a monthly ceiling, spent in its
// period. A request reserves its worst case on both counters in one Lua call (refused when a budget
// would be passed); settlements are batched off the request path within settleDelay, so a
// reservation may stay counted a little longer, never less. Unbudgeted keys never reach Redis.
type Budgets struct {
	rc     *redis.Client
	prefix string
	log    *slog.Logger

	mu        sync.Mutex
	pending   map[string]spend // settlements not yet written, by counter
	scheduled bool             // a flush is due within settleDelay
	flushes   sync.WaitGroup   // flushes scheduled or running
}

// spend is a settlement of a counter: tokens and requests to add (negative: given back).
type spend struct{ tokens, requests int64 }

// settleDelay is how long settlements are gathered before they are written (one pipeline).
const settleDelay = 10 * time.Millisecond

// NewBudgets builds the budgets; rc may be nil (a budgeted key is then refused: 503).
func NewBudgets(rc *redis.Client, keyPrefix string, log *slog.Logger) *Budgets {
	return &Budgets{rc: rc, prefix: keyPrefix + ":aibudget:", log: log, pending: map[string]spend{}}
}

// reserveScript reserves ARGV[1] tokens and one request on every counter of KEYS (hashes: t
// tokens, r requests) unless that passes one of their budgets; counter i has the token budget
// ARGV[3i-1], the request budget ARGV[3i] (0: none) and the expiry ARGV[3i+1] (unix seconds; 0:
// none). It answers {0} when reserved, else {i, 1 tokens or 2 requests, tokens, requests} of the
// first counter refusing, as they are.
var reserveScript = redis.NewScript(`
local need = tonumber(ARGV[1])
for i = 1, #KEYS do
  local v = redis.call('HMGET', KEYS[i], 't', 'r')
  local t, r = tonumber(v[1]) or 0, tonumber(v[2]) or 0
  local tb, rb = tonumber(ARGV[3*i-1]), tonumber(ARGV[3*i])
  if rb > 0 and r + 1 > rb then return {i, 2, t, r} end
  if tb > 0 and t + need > tb then return {i, 1, t, r} end
end
for i = 1, #KEYS do
  redis.call('HINCRBY', KEYS[i], 't', need)
  redis.call('HINCRBY', KEYS[i], 'r', 1)
  if tonumber(ARGV[3*i+1]) > 0 then redis.call('EXPIREAT', KEYS[i], ARGV[3*i+1]) end
end
return {0}
`)

// settleScript adds ARGV[2i-1] tokens and ARGV[2i] requests to the counter KEYS[i], when it still
// exists (a period that ended is not brought back without its expiry).
var settleScript = redis.NewScript(`
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('HINCRBY', KEYS[i], 't', ARGV[2*i-1])
    redis.call('HINCRBY', KEYS[i], 'r', ARGV[2*i])
  end
end
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

// hold is a reservation on a key's counter and its owner's; settle or release it once (nil: no
// budget).
type hold struct {
	b        *Budgets
	counters []string
	tokens   int64
	done     atomic.Bool
}

// counter is one budget a request reserves on: a Redis hash and its limits.
type counter struct {
	key          string
	tokens, reqs int64
	period       string
	end          time.Time // the period's end (zero: none)
	owner        string    // "key" or "user": whose budget the refusal names
}

// Reserve reserves worst tokens and one request of p's budgets (the key's, and its owner's monthly
// ceiling), or refuses: 429 naming the budget with Retry-After at the period's end (a day for a
// budget without period), or 503 when Redis cannot be reached. Without budgets: nil, no cost.
func (b *Budgets) Reserve(ctx context.Context, p Principal, worst int64) (*hold, error) {
	pol := p.Policy
	keyed, capped := pol.TokenBudget > 0 || pol.RequestBudget > 0, p.UserTokenBudget > 0
	if !keyed && !capped {
		return nil, nil
	}
	if b == nil || b.rc == nil {
		return nil, fault.Unavailable("The key's budget cannot be checked (no Redis); try again")
	}
	now := time.Now()
	cs := make([]counter, 0, 2)
	if keyed {
		tag, end := periodOf(pol.BudgetPeriod, now)
		cs = append(cs, counter{key: b.prefix + strconv.FormatInt(p.KeyID, 10) + ":" + tag, tokens: pol.TokenBudget,
			reqs: pol.RequestBudget, period: pol.BudgetPeriod, end: end, owner: "key"})
	}
	if capped {
		tag, end := periodOf(PeriodMonth, now)
		cs = append(cs, counter{key: b.prefix + "u" + strconv.FormatInt(p.UserID, 10) + ":" + tag, tokens: p.UserTokenBudget,
			period: PeriodMonth, end: end, owner: "user"})
	}
	keys := make([]string, len(cs))
	args := make([]any, 1, 1+3*len(cs))
	args[0] = worst
	for i, c := range cs {
		keys[i] = c.key
		expire := int64(0)
		if !c.end.IsZero() {
			expire = c.end.Add(24 * time.Hour).Unix() // late settlements still find it
		}
		args = append(args, c.tokens, c.reqs, expire)
	}
	res, err := reserveScript.Run(ctx, b.rc, keys, args...).Int64Slice()
	if err != nil || len(res) == 0 || (res[0] != 0 && (len(res) != 4 || res[0] > int64(len(cs)))) {
		b.log.Warn("AI key budget unavailable", "keyId", p.KeyID, "error", fmt.Sprint(err))
		return nil, errBudgetUnavailable
	}
	if res[0] == 0 {
		return &hold{b: b, counters: keys, tokens: worst}, nil
	}
	return nil, refusal(cs[res[0]-1], res[1] == 1, res[2], worst, now)
}

// errBudgetUnavailable: Redis cannot be reached, so a budget cannot be checked (503).
var errBudgetUnavailable = fault.Unavailable("The key's budget cannot be checked; try again")

// refusal is the 429 of a budget reached: which one, and Retry-After at its period's end.
func refusal(c counter, tokens bool, spent, worst int64, now time.Time) error {
	wait := 24 * time.Hour
	span := "in total (budgetPeriod none)"
	if !c.end.IsZero() {
		wait = c.end.Sub(now)
		span = "this " + c.period + " (UTC)"
	}
	if c.owner == "user" {
		return fault.TooMany(fmt.Sprintf("Monthly token budget of this user reached: %d tokens %s, %d left; this request may use up to %d (lower max_tokens)",
			c.tokens, span, max(c.tokens-spent, 0), worst), wait)
	}
	if !tokens {
		return fault.TooMany(fmt.Sprintf("Request budget of this key reached: %d requests %s", c.reqs, span), wait)
	}
	return fault.TooMany(fmt.Sprintf("Token budget of this key reached: %d tokens %s, %d left; this request may use up to %d (lower max_tokens)",
		c.tokens, span, max(c.tokens-spent, 0), worst), wait)
}

// settle turns the reservation into used tokens (the upstream's reported usage).
func (h *hold) settle(used int64) {
	if h != nil && h.done.CompareAndSwap(false, true) {
		h.b.adjust(h.counters, used-h.tokens, 0)
	}
}

// release gives the reservation back (the upstream did not answer a generation).
func (h *hold) release() {
	if h != nil && h.done.CompareAndSwap(false, true) {
		h.b.adjust(h.counters, -h.tokens, -1)
	}
}

// adjust adds a settlement to the counters' pending ones and makes sure a flush is due.
func (b *Budgets) adjust(counters []string, tokens, requests int64) {
	if tokens == 0 && requests == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range counters {
		d := b.pending[k]
		b.pending[k] = spend{d.tokens + tokens, d.requests + requests}
	}
	if !b.scheduled {
		b.scheduled = true
		b.flushes.Add(1)
		time.AfterFunc(settleDelay, func() { defer b.flushes.Done(); b.flush() })
	}
}

// flush writes the pending settlements in one settleScript call; a failed write is tried twice
// more, then logged as lost.
func (b *Budgets) flush() {
	b.mu.Lock()
	batch := b.pending
	b.pending, b.scheduled = map[string]spend{}, false
	b.mu.Unlock()
	keys := make([]string, 0, len(batch))
	args := make([]any, 0, 2*len(batch))
	for k, d := range batch {
		if d.tokens != 0 || d.requests != 0 {
			keys = append(keys, k)
			args = append(args, d.tokens, d.requests)
		}
	}
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if err = settleScript.Run(ctx, b.rc, keys, args...).Err(); err == nil || errors.Is(err, context.DeadlineExceeded) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		b.log.Warn("AI key budget settlements lost", "counters", len(keys), "error", err.Error())
	}
}

// Wait writes the pending settlements and waits for those being written (at shutdown, and in tests).
func (b *Budgets) Wait() {
	b.flush()
	b.flushes.Wait()
}

// promptEstimate is a prompt's worst-case estimate in tokens from its size in bytes: half a token
// per byte, plus the chat template's overhead.
func promptEstimate(bytes int) int64 { return int64(bytes/2) + 16 }
