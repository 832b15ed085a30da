package databases

import (
	"context"
	"fmt"
	"strings"

	"provisioner/platform/db"
)

// SetLogin allows or refuses the logins of the database's login role. Refusing (pause) also
// closes the database to every other role (closeToOthers: the owner may have granted CONNECT to
// PUBLIC or to another tenant's role, which still connected to a paused database; the
// credentials of the database lose it too: the provisioner has refused their logins first) and
// ends every session of the role. Allowing grants CONNECT to the login role again (SetUserLogin
// to each Active credential); what the owner had granted to PUBLIC or to other roles is not
// given back.
func (e *postgresEngine) SetLogin(ctx context.Context, dbName, role string, enabled bool) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if enabled {
		if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH LOGIN%s", qi(role), e.limit)); err != nil {
			return err
		}
		return e.grantConnect(ctx, dbName, role)
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH NOLOGIN", qi(role))); err != nil {
		return err
	}
	if err := e.closeToOthers(ctx, dbName, []string{role}); err != nil {
		return err
	}
	return e.terminate(ctx, "usename = $1", role)
}

// RevokeForeignAccess implements foreignAccessRevoker: it closes the database to every role but
// its login role and keep (closeToOthers), as a pause does, leaving the logins as they are. Keep's
// names only reach the server as parameters.
func (e *postgresEngine) RevokeForeignAccess(ctx context.Context, dbName, role string, keep []string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	return e.closeToOthers(ctx, dbName, append([]string{role}, keep...))
}

// closeToOthers closes dbName to every role but keep: it revokes CONNECT on the database from
// PUBLIC and from every other role (the database's owner and superusers keep theirs; CASCADE
// takes what a grantee granted on), then ends every session on the database of a role not in
// keep, the service's own aside. What those roles were granted inside the database stays, out of
// their reach without CONNECT.
func (e *postgresEngine) closeToOthers(ctx context.Context, dbName string, keep []string) error {
	if err := e.revokeConnect(ctx, dbName, keep); err != nil {
		return err
	}
	return e.terminate(ctx, "datname = $1 AND usename <> current_user AND usename <> ALL($2::text[])", dbName, "{"+strings.Join(keep, ",")+"}")
}

// grantConnect grants CONNECT on dbName to role (a database that is gone needs nothing).
func (e *postgresEngine) grantConnect(ctx context.Context, dbName, role string) error {
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	err = e.exec(ctx, fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", qi(dbName), qi(role)))
	if db.IsCode(err, "3D000") {
		return nil
	}
	return err
}

// revokeConnect revokes CONNECT on dbName from PUBLIC and from every role but keep, the
// database's owner and superusers.
func (e *postgresEngine) revokeConnect(ctx context.Context, dbName string, keep []string) error {
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	rows, err := e.pool.QueryContext(ctx, `SELECT DISTINCT pg_catalog.quote_ident(r.rolname) FROM pg_catalog.pg_database d
		CROSS JOIN LATERAL pg_catalog.aclexplode(d.datacl) a JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
		WHERE d.datname = $1 AND a.privilege_type = 'CONNECT' AND NOT r.rolsuper AND r.oid <> d.datdba AND r.rolname <> ALL($2::text[])`, dbName, "{"+strings.Join(keep, ",")+"}")
	if err != nil {
		return fmt.Errorf("postgres: list CONNECT of %s: %w", dbName, err)
	}
	who := []string{"PUBLIC"}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: list CONNECT of %s: %w", dbName, err)
		}
		who = append(who, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: list CONNECT of %s: %w", dbName, err)
	}
	err = e.exec(ctx, fmt.Sprintf("REVOKE CONNECT ON DATABASE %s FROM %s CASCADE", qi(dbName), strings.Join(who, ", ")))
	if db.IsCode(err, "3D000") {
		return nil
	}
	return err
}

// SetOwnerPassword implements Engine. ALTER ROLE … PASSWORD leaves LOGIN or NOLOGIN as it is;
// the connection limit is set again as everywhere else a tenant role is changed.
func (e *postgresEngine) SetOwnerPassword(ctx context.Context, dbName, role, password string) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH PASSWORD %s%s", qi(role), ql(password), e.limit)); err != nil {
		if db.IsCode(err, "42704") { // no such role: nothing to change
			return nil
		}
		return err
	}
	return e.terminate(ctx, "usename = $1", role)
}
