package databases

import (
	"context"
	"time"
)

// SetTenantIdleTime sets how long the PostgreSQL engine's admin sessions into tenant databases
// stay open unused, for pools opened from now on; the returned func restores it.
func SetTenantIdleTime(d time.Duration) func() {
	old := tenantIdleTime
	tenantIdleTime = d
	return func() { tenantIdleTime = old }
}

// RetireLogin retires login of database dbName (owned by owner) on engine, as the finisher does
// at the end of a grace period.
func RetireLogin(ctx context.Context, e *Engines, engine, dbName, owner, login string) error {
	return e.Get(engine).(loginRotator).RetireLogin(ctx, dbName, owner, login)
}

// SetEngineSlotWait sets how long a request past Databases:MaxEngineWaits waits for a slot before
// its 503; the returned func restores it.
func SetEngineSlotWait(d time.Duration) func() {
	old := engineSlotWait
	engineSlotWait = d
	return func() { engineSlotWait = old }
}

// SetUsageBatchesPerRefresh cuts each engine's usage refresh after n batches of 5,000 databases,
// as if its time had run out; the returned func restores it.
func SetUsageBatchesPerRefresh(n int) func() {
	old := usageBatchesPerRefresh
	usageBatchesPerRefresh = n
	return func() { usageBatchesPerRefresh = old }
}

// UsageBatchOf is how many databases of engine a batch of u's next refresh takes.
func UsageBatchOf(u *UsageRefresher, engine string) int64 { return u.progressOf(engine).batch }
