package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/ulule/limiter/v3"
	sredis "github.com/ulule/limiter/v3/drivers/store/redis"
)

// store returns the Redis store when it may be used, else the memory store. While Redis is down
// it costs no network round trip; once the retry time has passed, exactly one caller gets the
// Redis store (the probe) and pushes the next retry further, the others keep the memory store.
func (l *Limiter) store() (limiter.Store, bool) {
	if l.o.Redis == nil {
		return l.memory, false
	}
	probe := false
	if until := l.downUntil.Load(); until != 0 {
		now := time.Now().UnixNano()
		if now < until || !l.downUntil.CompareAndSwap(until, now+int64(l.o.RetryEvery)) {
			return l.memory, false
		}
		probe = true
	}
	if ref := l.redis.Load(); ref != nil {
		return ref.Store, true
	}
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	if ref := l.redis.Load(); ref != nil {
		return ref.Store, true
	}
	if !probe && l.downUntil.Load() != 0 {
		// This caller waited while another one failed to load the scripts: Redis is down.
		return l.memory, false
	}
	s, err := sredis.NewStoreWithOptions(l.o.Redis, limiter.StoreOptions{Prefix: l.o.Prefix})
	if err != nil {
		l.markDown(err)
		return l.memory, false
	}
	l.redis.Store(&storeRef{s})
	return s, true
}

// markDown records a Redis failure: Redis is left alone for RetryEvery, and the first failure
// of an outage is logged.
func (l *Limiter) markDown(err error) {
	now := time.Now()
	l.downAt.Store(now.UnixNano())
	l.downUntil.Store(now.Add(l.o.RetryEvery).UnixNano())
	if !l.down.Swap(true) {
		l.o.Logger.Warn("rate limits fall back to the in-process store (per replica): Redis is unreachable",
			"error", err.Error(), "retryEvery", l.o.RetryEvery.String())
	}
}

// markUp records a Redis success of an operation that started at start (unix nanos): one that
// started before the last failure says nothing about Redis now.
func (l *Limiter) markUp(start int64) {
	if !l.down.Load() || start <= l.downAt.Load() {
		return
	}
	if l.down.CompareAndSwap(true, false) {
		l.downUntil.Store(0)
		l.o.Logger.Info("rate limits use Redis again")
	}
}

// do runs op on the store in use; a Redis error switches to the memory store, never to an error.
func (l *Limiter) do(ctx context.Context, verb, name string, op func(limiter.Store, limiter.Rate) (limiter.Context, error)) (Result, error) {
	rate, ok := l.rates[name]
	if !ok {
		return Result{}, fmt.Errorf("%s %q: unknown rate limit", verb, name)
	}
	start := time.Now().UnixNano()
	s, isRedis := l.store()
	c, err := op(s, rate)
	switch {
	case err != nil && isRedis:
		if ctx.Err() == nil { // not the caller giving up: Redis failed
			l.markDown(err)
		}
		c, err = op(l.memory, rate)
	case isRedis:
		l.markUp(start)
	}
	if err != nil {
		return Result{}, fmt.Errorf("%s %q: %w", verb, name, err)
	}
	return Result{Name: name, Limit: c.Limit, Remaining: c.Remaining, Reached: c.Reached, Period: rate.Period,
		// ulule truncates the window's end to the second: round it up instead, so that a client
		// waiting until Reset (or for Retry-After) finds the window over.
		Reset: roundUpReset(time.Unix(c.Reset, 0), rate.Period)}, nil
}
