package databases

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"time"
)

// advisoryClass is the first key of the engine's advisory locks (ASCII "prov"), so they never
// meet another application's single-key locks on the admin database.
const advisoryClass = 0x70726f76

// dbLocks serialises the statement sequences that change one tenant database's catalogue rows
// (ACLs, default privileges, ownership), which PostgreSQL refuses to change concurrently ("tuple
// concurrently updated"): a per-database mutex in the process, and a session advisory lock keyed
// on the database's name across processes, on connections of their own. Each operation takes one
// lock, first, and holds no other while waiting, so no two wait for each other.
type dbLocks struct {
	pool *sql.DB
	mu   sync.Mutex
	held map[string]*dbLock
}

type dbLock struct {
	ch    chan struct{}
	users int
}

func newDBLocks(pool *sql.DB) *dbLocks {
	pool.SetMaxOpenConns(8)
	pool.SetMaxIdleConns(2)
	return &dbLocks{pool: pool, held: map[string]*dbLock{}}
}

// lock waits (until ctx ends) for dbName's lock and returns its release, which is safe to
// defer: it runs on a context of its own, and a connection whose unlock fails is closed, which
// ends its session and so its lock.
func (l *dbLocks) lock(ctx context.Context, dbName string) (func(), error) {
	l.mu.Lock()
	m, ok := l.held[dbName]
	if !ok {
		m = &dbLock{ch: make(chan struct{}, 1)}
		l.held[dbName] = m
	}
	m.users++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		m.users--
		if m.users == 0 {
			delete(l.held, dbName)
		}
		l.mu.Unlock()
	}
	select {
	case m.ch <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, fmt.Errorf("postgres: wait for database %s: %w", dbName, ctx.Err())
	}
	inProcess := func() {
		<-m.ch
		leave()
	}
	conn, err := l.pool.Conn(ctx)
	if err != nil {
		inProcess()
		return nil, fmt.Errorf("postgres: lock database %s: %w", dbName, err)
	}
	discard := func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // closes the session: its locks go
		_ = conn.Close()
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_catalog.pg_advisory_lock($1, pg_catalog.hashtext($2))", advisoryClass, dbName); err != nil {
		discard() // the lock may have been granted as the wait was cancelled
		inProcess()
		return nil, fmt.Errorf("postgres: lock database %s: %w", dbName, err)
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var released bool
		if err := conn.QueryRowContext(uctx, "SELECT pg_catalog.pg_advisory_unlock($1, pg_catalog.hashtext($2))", advisoryClass, dbName).Scan(&released); err != nil || !released {
			discard()
		} else {
			_ = conn.Close()
		}
		inProcess()
	}, nil
}
