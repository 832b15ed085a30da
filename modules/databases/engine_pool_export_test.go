package databases

import "database/sql"

// EngineLogins is how many admin sessions the pool of engine (by id) has opened so far: those
// open now and those it closed (idle past its bounds, or too old).
func EngineLogins(e *Engines, engine string) int64 {
	var pool *sql.DB
	switch en := e.Get(engine).(type) {
	case *postgresEngine:
		pool = en.pool
	case *mysqlEngine:
		pool = en.pool
	default:
		return 0
	}
	st := pool.Stats()
	return int64(st.OpenConnections) + st.MaxIdleClosed + st.MaxIdleTimeClosed + st.MaxLifetimeClosed
}
