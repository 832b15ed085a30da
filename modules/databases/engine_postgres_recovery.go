package databases

import (
	"context"
	"fmt"
	"strings"
)

// CloseLogins implements Engine: NOLOGIN on each of roles, then dbName is closed to every other
// role (closeToOthers: CONNECT revoked from PUBLIC and the rest, their sessions ended) and the
// sessions of roles end too. Roles' names only reach the server quoted or as parameters.
func (e *postgresEngine) CloseLogins(ctx context.Context, dbName string, roles []string) error {
	if err := checkNames(append([]string{dbName}, roles...)...); err != nil {
		return err
	}
	for _, role := range roles {
		if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH NOLOGIN", qi(role))); err != nil {
			return err
		}
	}
	if err := e.closeToOthers(ctx, dbName, roles); err != nil {
		return err
	}
	return e.terminate(ctx, "usename = ANY($1::text[])", "{"+strings.Join(roles, ",")+"}")
}

// OpenLogins implements Engine: LOGIN (with the connection limit) and CONNECT on dbName for each
// of roles.
func (e *postgresEngine) OpenLogins(ctx context.Context, dbName string, roles []string) error {
	if err := checkNames(append([]string{dbName}, roles...)...); err != nil {
		return err
	}
	for _, role := range roles {
		if err := e.SetLogin(ctx, dbName, role, true); err != nil {
			return err
		}
	}
	return nil
}
