package databases

import "time"

// SetTenantIdleTime sets how long the PostgreSQL engine's admin sessions into tenant databases
// stay open unused, for pools opened from now on; the returned func restores it.
func SetTenantIdleTime(d time.Duration) func() {
	old := tenantIdleTime
	tenantIdleTime = d
	return func() { tenantIdleTime = old }
}
