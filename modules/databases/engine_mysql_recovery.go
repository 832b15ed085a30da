package databases

import "context"

// CloseLogins implements Engine: each of roles is locked (ACCOUNT LOCK) and its sessions killed.
// A MySQL/MariaDB tenant holds no GRANT OPTION, so no other user was let into the schema.
func (e *mysqlEngine) CloseLogins(ctx context.Context, dbName string, roles []string) error {
	return e.setLogins(ctx, dbName, roles, false)
}

// OpenLogins implements Engine: each of roles is unlocked, with the connection limit.
func (e *mysqlEngine) OpenLogins(ctx context.Context, dbName string, roles []string) error {
	return e.setLogins(ctx, dbName, roles, true)
}

func (e *mysqlEngine) setLogins(ctx context.Context, dbName string, roles []string, enabled bool) error {
	for _, role := range roles {
		if err := e.SetLogin(ctx, dbName, role, enabled); err != nil {
			return err
		}
	}
	return nil
}
