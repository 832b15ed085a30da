package databases

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"provisioner/platform/db"
)

// serverVersion is the server's server_version_num, read once.
func (e *postgresEngine) serverVersion(ctx context.Context) (int, error) {
	e.mu.Lock()
	v := e.version
	e.mu.Unlock()
	if v != 0 {
		return v, nil
	}
	if err := e.pool.QueryRowContext(ctx, "SELECT pg_catalog.current_setting('server_version_num')::int").Scan(&v); err != nil {
		return 0, fmt.Errorf("postgres version: %w", err)
	}
	e.mu.Lock()
	e.version = v
	e.mu.Unlock()
	return v, nil
}

// openIn opens an admin pool into dbName, with the pinned settings (see pinnedSettings: the
// tenant's database defaults do not apply to it; default_transaction_read_only off is why the
// service's own sessions write grants while the database is read-only).
func (e *postgresEngine) openIn(ctx context.Context, dbName string) (*sql.DB, error) {
	version, err := e.serverVersion(ctx)
	if err != nil {
		return nil, err
	}
	u := pinned(*e.admin, version)
	u.Path = "/" + dbName
	conn, err := db.Connector(u.String())
	if err != nil {
		return nil, err
	}
	p := sql.OpenDB(conn)
	p.SetMaxOpenConns(2)
	// Kept for later calls, but not for ever: an idle session per tenant database that was ever
	// given a read-only credential or switched read-only took a connection slot of the server
	// for good (a superuser's: with enough databases, the tenants were refused).
	p.SetConnMaxIdleTime(tenantIdleTime)
	return p, nil
}

// tenantIdleTime is how long an admin session into a tenant database stays open unused.
var tenantIdleTime = time.Minute

// tenant returns an admin connection into dbName (for grants inside it), kept for later calls.
func (e *postgresEngine) tenant(ctx context.Context, dbName string) (*sql.DB, error) {
	e.mu.Lock()
	p, ok := e.per[dbName]
	e.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := e.openIn(ctx, dbName)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if q, ok := e.per[dbName]; ok { // opened concurrently
		_ = p.Close()
		return q, nil
	}
	e.per[dbName] = p
	return p, nil
}

func (e *postgresEngine) closeTenant(dbName string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p, ok := e.per[dbName]; ok {
		_ = p.Close()
		delete(e.per, dbName)
	}
}
