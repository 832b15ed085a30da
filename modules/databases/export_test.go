package databases

import "time"

// SetTenantIdleTime sets how long the PostgreSQL engine's admin sessions into tenant databases
// stay open unused, for pools opened from now on; the returned func restores it.
func SetTenantIdleTime(d time.Duration) func() {
	old := tenantIdleTime
	tenantIdleTime = d
	return func() { tenantIdleTime = old }
}

// SetEngineSlotWait sets how long a request past Databases:MaxEngineWaits waits for a slot before
// its 503; the returned func restores it.
func SetEngineSlotWait(d time.Duration) func() {
	old := engineSlotWait
	engineSlotWait = d
	return func() { engineSlotWait = old }
}
