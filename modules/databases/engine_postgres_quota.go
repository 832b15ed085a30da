package databases

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"provisioner/platform/db"
)

// quotaHolder is the role that owns a PostgreSQL tenant database's objects while it is over its
// quota; it cannot log in.
func quotaHolder(dbName string) string { return dbName + "_quota" }

// SetReadOnly switches dbName to read-only or back with privileges the tenant cannot undo: over the
// quota everything it owns but functions moves to a NOLOGIN holder (quotaHolder), every writing
// privilege is revoked from every other role, and the login role keeps SELECT, DELETE and TRUNCATE.
// Back, the holder's objects return to the login role. One transaction, repeatable; a tenant's lock
// makes it give up after switchLockWait (tried once more, then at the next usage refresh).
func (e *postgresEngine) SetReadOnly(ctx context.Context, dbName, role string, readOnly bool) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	unlock, err := e.locks.lock(ctx, dbName)
	if err != nil {
		return err
	}
	defer unlock()
	t, err := e.tenant(ctx, dbName)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		if err := e.terminate(ctx, "datname = $1 AND usename <> current_user", dbName); err != nil {
			return err
		}
		err = e.switchOwners(ctx, t, dbName, role, readOnly)
		if err == nil || !db.IsCode(err, "55P03") || attempt == switchAttempts {
			break
		}
	}
	if err != nil {
		return err
	}
	// The setting is kept for the clear error it gives ("cannot execute INSERT in a read-only
	// transaction"); the privileges above are what holds.
	v := "off"
	if readOnly {
		v = "on"
	}
	if err := e.exec(ctx, fmt.Sprintf("ALTER DATABASE %s SET default_transaction_read_only = %s", qi(dbName), v)); err != nil {
		return err
	}
	// Sessions pick the setting up when they connect: end the open ones.
	// The service's own sessions there (grants for credentials) stay.
	return e.terminate(ctx, "datname = $1 AND usename <> current_user", dbName)
}

// switchLockWait bounds how long the read-only switch waits for one lock; switchAttempts is how
// many times SetReadOnly tries when a lock is not granted in time.
const (
	switchLockWait = "2s"
	switchAttempts = 2
)

// switchOwners is SetReadOnly's transaction in dbName (t: the admin pool there).
func (e *postgresEngine) switchOwners(ctx context.Context, t *sql.DB, dbName, role string, readOnly bool) error {
	holder := quotaHolder(dbName)
	tx, err := t.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("postgres: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck
	run := func(stmts ...string) error {
		for _, st := range stmts {
			if _, err := tx.ExecContext(ctx, st); err != nil {
				return fmt.Errorf("postgres: %s: %w", st, err)
			}
		}
		return nil
	}
	list := func(what, q string, args ...any) ([]string, error) {
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return nil, fmt.Errorf("postgres: list %s: %w", what, err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				return nil, fmt.Errorf("postgres: list %s: %w", what, err)
			}
			out = append(out, s)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("postgres: list %s: %w", what, err)
		}
		return out, nil
	}
	if err := run("SET LOCAL lock_timeout = '" + switchLockWait + "'"); err != nil {
		return err
	}
	var exists bool
	var mark string
	err = tx.QueryRowContext(ctx, "SELECT true, coalesce(pg_catalog.shobj_description(oid, 'pg_authid'), '') FROM pg_catalog.pg_roles WHERE rolname = $1", holder).Scan(&exists, &mark)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("postgres: %w", err)
	}
	holderMark := "provisioner:quota:" + dbName
	if exists && mark != holderMark {
		return fmt.Errorf("postgres: role %s exists and is not the quota holder of %s", holder, dbName)
	}
	var from, to string
	if readOnly {
		if !exists {
			if err := run(fmt.Sprintf("CREATE ROLE %s NOLOGIN NOINHERIT", qi(holder)),
				fmt.Sprintf("COMMENT ON ROLE %s IS %s", qi(holder), ql(holderMark))); err != nil {
				return err
			}
		}
		from, to = role, holder
	} else if exists {
		from, to = holder, role
	}
	if from != "" {
		// Everything the writers own. Over the quota: every role but superusers, the holder and
		// the predefined ones (pg_database_owner owns schema public: it is the holder then). Back:
		// the holder's.
		stmts, err := list("owned objects", `
			WITH w AS (SELECT oid FROM pg_catalog.pg_roles
			           WHERE CASE WHEN $2 THEN NOT rolsuper AND rolname <> $3 AND rolname NOT LIKE 'pg\_%' ELSE rolname = $1 END)
			SELECT pg_catalog.format('ALTER SCHEMA %I OWNER TO %I', n.nspname, $3::text) FROM pg_catalog.pg_namespace n WHERE n.nspowner IN (SELECT oid FROM w)
			UNION ALL
			SELECT pg_catalog.format('ALTER %s %I.%I OWNER TO %I',
			              CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END,
			              n.nspname, c.relname, $3::text)
			FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relowner IN (SELECT oid FROM w) AND c.relkind IN ('r', 'p', 'm', 'f', 'S')
			  AND NOT (c.relkind = 'S' AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
			           AND d.objid = c.oid AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype IN ('a', 'i')))
			UNION ALL
			SELECT pg_catalog.format('ALTER LARGE OBJECT %s OWNER TO %I', m.oid, $3::text) FROM pg_catalog.pg_largeobject_metadata m WHERE m.lomowner IN (SELECT oid FROM w)`,
			from, readOnly, to)
		if err != nil {
			return err
		}
		stmts = append(stmts, fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", qi(dbName), qi(to)))
		if err := run(stmts...); err != nil {
			return err
		}
	}
	if readOnly {
		schemas, err := list("schemas", `SELECT nspname FROM pg_catalog.pg_namespace
			WHERE nspname <> 'information_schema' AND nspname NOT LIKE 'pg\_%'`)
		if err != nil {
			return err
		}
		// Every role holding a privilege in the database, but the holder, superusers and
		// pg_database_owner (the holder now; revoking from it would take CREATE on schema public
		// from the login role once it owns the database again). PUBLIC is always named.
		grantees, err := list("grantees", `
			WITH acl AS (
			  SELECT c.relacl AS a FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
			    WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
			  UNION ALL SELECT n.nspacl FROM pg_catalog.pg_namespace n WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
			  UNION ALL SELECT m.lomacl FROM pg_catalog.pg_largeobject_metadata m
			  UNION ALL SELECT d.datacl FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
			SELECT DISTINCT pg_catalog.quote_ident(r.rolname) FROM acl CROSS JOIN LATERAL pg_catalog.aclexplode(acl.a) x
			  JOIN pg_catalog.pg_roles r ON r.oid = x.grantee
			WHERE acl.a IS NOT NULL AND NOT r.rolsuper AND r.rolname <> $1 AND r.rolname <> 'pg_database_owner'`, holder)
		if err != nil {
			return err
		}
		who := strings.Join(append([]string{"PUBLIC"}, grantees...), ", ")
		los, err := list("large objects", `SELECT m.oid::text FROM pg_catalog.pg_largeobject_metadata m
			WHERE EXISTS (SELECT 1 FROM pg_catalog.aclexplode(m.lomacl) x WHERE x.grantee <> m.lomowner AND x.privilege_type = 'UPDATE')`)
		if err != nil {
			return err
		}
		var stmts []string
		for _, n := range schemas {
			stmts = append(stmts, fmt.Sprintf("REVOKE CREATE ON SCHEMA %s FROM %s CASCADE", qi(n), who),
				fmt.Sprintf("REVOKE INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES, TRIGGER ON ALL TABLES IN SCHEMA %s FROM %s CASCADE", qi(n), who),
				fmt.Sprintf("REVOKE USAGE, UPDATE ON ALL SEQUENCES IN SCHEMA %s FROM %s CASCADE", qi(n), who))
		}
		for _, lo := range los {
			stmts = append(stmts, fmt.Sprintf("REVOKE UPDATE ON LARGE OBJECT %s FROM %s CASCADE", lo, who))
		}
		stmts = append(stmts, fmt.Sprintf("REVOKE CREATE, TEMPORARY ON DATABASE %s FROM %s CASCADE", qi(dbName), who))
		// What the login role (and through it the full-access credentials) may still do.
		for _, n := range schemas {
			stmts = append(stmts, fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", qi(n), qi(role)),
				fmt.Sprintf("GRANT SELECT, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA %s TO %s", qi(n), qi(role)),
				fmt.Sprintf("GRANT SELECT ON ALL SEQUENCES IN SCHEMA %s TO %s", qi(n), qi(role)))
		}
		// The login role's CONNECT was the owner's and went with the ownership: CONNECT only.
		stmts = append(stmts, "REVOKE EXECUTE ON "+loCreators+" FROM PUBLIC", fmt.Sprintf("REVOKE EXECUTE ON %s FROM %s", loCreators, qi(role)),
			fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s", qi(dbName), qi(role)))
		if err := run(stmts...); err != nil {
			return err
		}
	} else {
		// To the login role (and through it its full-access credentials), not back to PUBLIC:
		// a read-only credential creates no large object.
		if err := run("REVOKE EXECUTE ON "+loCreators+" FROM PUBLIC", fmt.Sprintf("GRANT EXECUTE ON %s TO %s", loCreators, qi(role)),
			fmt.Sprintf("GRANT TEMPORARY ON DATABASE %s TO %s", qi(dbName), qi(role))); err != nil {
			return err
		}
		if exists {
			if err := run(fmt.Sprintf("DROP OWNED BY %s", qi(holder)), fmt.Sprintf("DROP ROLE %s", qi(holder))); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return nil
}

// usagePassDone implements usagePass: the roles of every live database have the limit, so later
// refreshes skip that step.
func (e *postgresEngine) usagePassDone() {
	e.mu.Lock()
	e.limitsSet = true
	e.mu.Unlock()
}

// Usage implements Engine. A database is active while a tenant's session is connected to it: a
// client backend of a role other than the service's own admin sessions and autovacuum's workers.
func (e *postgresEngine) Usage(ctx context.Context, dbs []string) (map[string]Usage, error) {
	out := map[string]Usage{}
	if err := e.lockDown(ctx); err != nil { // the refresher's first run locks an existing cluster down
		return nil, err
	}
	if len(dbs) == 0 {
		return out, nil
	}
	e.mu.Lock()
	limited := e.limitsSet
	e.mu.Unlock()
	if !limited { // and gives the roles made before the limit existed theirs
		if err := e.limitRoles(ctx, dbs); err != nil {
			return nil, err
		}
	}
	rows, err := e.pool.QueryContext(ctx, `
		SELECT d.datname, pg_catalog.pg_database_size(d.datname) - `+pgRelcacheFile+` + `+pgSharedBytes+`,
		       EXISTS (SELECT 1 FROM pg_catalog.pg_stat_activity a WHERE a.datname = d.datname AND a.pid <> pg_catalog.pg_backend_pid()
		               AND a.backend_type = 'client backend' AND a.usename <> current_user)
		FROM pg_catalog.pg_database d WHERE d.datname = ANY($1::text[])`, "{"+strings.Join(dbs, ",")+"}")
	if err != nil {
		return nil, fmt.Errorf("postgres usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var u Usage
		if err := rows.Scan(&name, &u.Bytes, &u.Active); err != nil {
			return nil, fmt.Errorf("postgres usage: %w", err)
		}
		out[name] = u
	}
	return out, rows.Err()
}

// pgRelcacheFile is the size of database d's relation cache file (pg_internal.init), which the
// server writes when any session (the service's own, an autovacuum worker) connects and removes
// when the catalogs change: it is the server's, not the tenant's, and would otherwise make an
// unused database seem to grow and shrink by about 160 kB. Read only where the service may call
// pg_stat_file (a superuser, or granted it: before PostgreSQL 11 only a superuser) and the
// database is in the default tablespace.
const pgRelcacheFile = `CASE WHEN d.dattablespace = 1663
		         AND pg_catalog.has_function_privilege('pg_catalog.pg_stat_file(text, boolean)', 'EXECUTE')
		         AND (pg_catalog.current_setting('server_version_num')::int >= 110000
		              OR (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user))
		       THEN COALESCE((pg_catalog.pg_stat_file('base/' || d.oid || '/pg_internal.init', true)).size, 0) ELSE 0 END`

// pgSharedBytes is what a tenant database d stores in the cluster's shared catalogs, which
// pg_database_size does not count: the comment on the database, its ALTER DATABASE … SET settings,
// and the settings and comments its roles (owner and CONNECT grantees, superusers aside) give
// themselves. Text counts uncompressed (octet_length).
const pgSharedBytes = `COALESCE((SELECT SUM(pg_catalog.octet_length(s.setconfig::text)) FROM pg_catalog.pg_db_role_setting s
		         WHERE s.setdatabase = d.oid OR s.setrole IN (` + pgTenantRoles + `)), 0)
		     + COALESCE((SELECT SUM(pg_catalog.octet_length(c.description)) FROM pg_catalog.pg_shdescription c
		         WHERE (c.classoid = 'pg_catalog.pg_database'::pg_catalog.regclass AND c.objoid = d.oid)
		            OR (c.classoid = 'pg_catalog.pg_authid'::pg_catalog.regclass AND c.objoid IN (` + pgTenantRoles + `))), 0)`

// pgTenantRoles are the roles of database d: its owner and the roles granted CONNECT on it, but
// no superuser (the service's own).
const pgTenantRoles = `SELECT r.oid FROM pg_catalog.pg_roles r WHERE NOT r.rolsuper AND (r.oid = d.datdba
		            OR r.oid IN (SELECT a.grantee FROM pg_catalog.aclexplode(d.datacl) a WHERE a.privilege_type = 'CONNECT'))`

// maxRoleSettingBytes bounds the text of the settings one role of a read-only (or over-quota)
// database gives itself (ALTER ROLE <itself> [IN DATABASE …] SET): far more than any search_path.
const maxRoleSettingBytes = 64 << 10

// GuardOverQuota resets every setting a role of one of dbs has on itself (ALTER ROLE … RESET,
// role-wide and in each database) when their text is over maxRoleSettingBytes, but the
// service's own default_transaction_read_only (read-only credentials) and role (second logins,
// a role name). Read-only takes
// the database's ownership away, so its comment and settings cannot grow, but a role may always
// set its own defaults: without this a read-only tenant went on filling the shared catalogue
// pg_db_role_setting. Settings of the database itself are left alone (counted, see pgSharedBytes).
func (e *postgresEngine) GuardOverQuota(ctx context.Context, dbs []string) error {
	rows, err := e.pool.QueryContext(ctx, `
		WITH roles AS (SELECT DISTINCT r.oid, r.rolname FROM pg_catalog.pg_database d
		                 JOIN pg_catalog.pg_roles r ON NOT r.rolsuper AND (r.oid = d.datdba
		                   OR r.oid IN (SELECT a.grantee FROM pg_catalog.aclexplode(d.datacl) a WHERE a.privilege_type = 'CONNECT'))
		               WHERE d.datname = ANY($1::text[])),
		     big AS (SELECT s.setrole FROM pg_catalog.pg_db_role_setting s WHERE s.setrole IN (SELECT oid FROM roles)
		             GROUP BY s.setrole HAVING SUM(pg_catalog.octet_length(s.setconfig::text)) > $2)
		SELECT DISTINCT r.rolname, COALESCE(o.datname, ''), pg_catalog.split_part(c.setting, '=', 1)
		FROM pg_catalog.pg_db_role_setting s CROSS JOIN LATERAL pg_catalog.unnest(s.setconfig) c(setting)
		  JOIN roles r ON r.oid = s.setrole LEFT JOIN pg_catalog.pg_database o ON o.oid = s.setdatabase
		WHERE s.setrole IN (SELECT setrole FROM big) AND (s.setdatabase = 0 OR o.oid IS NOT NULL)
		  AND pg_catalog.split_part(c.setting, '=', 1) NOT IN ('default_transaction_read_only', 'role')`,
		"{"+strings.Join(dbs, ",")+"}", maxRoleSettingBytes)
	if err != nil {
		return fmt.Errorf("postgres: list role settings: %w", err)
	}
	var stmts []string
	for rows.Next() {
		var role, in, name string
		if err := rows.Scan(&role, &in, &name); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: list role settings: %w", err)
		}
		st := fmt.Sprintf("ALTER ROLE %s", qi(role))
		if in != "" {
			st += " IN DATABASE " + qi(in)
		}
		stmts = append(stmts, st+" RESET "+qi(name))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: list role settings: %w", err)
	}
	return e.exec(ctx, stmts...)
}

// limitRoles gives CONNECTION LIMIT connLimit to every role that is not a superuser and may
// connect to one of dbs (their login roles and access credentials) but has another limit, such as
// roles made before there was one.
func (e *postgresEngine) limitRoles(ctx context.Context, dbs []string) error {
	rows, err := e.pool.QueryContext(ctx, `
		SELECT DISTINCT r.rolname FROM pg_catalog.pg_database d
		  CROSS JOIN LATERAL pg_catalog.aclexplode(d.datacl) a
		  JOIN pg_catalog.pg_roles r ON r.oid = a.grantee
		WHERE d.datname = ANY($1::text[]) AND a.privilege_type = 'CONNECT' AND NOT r.rolsuper AND r.rolconnlimit <> $2`,
		"{"+strings.Join(dbs, ",")+"}", e.connLimit)
	if err != nil {
		return fmt.Errorf("postgres: list roles: %w", err)
	}
	var roles []string
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			rows.Close()
			return fmt.Errorf("postgres: list roles: %w", err)
		}
		if SafeName.MatchString(r) {
			roles = append(roles, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("postgres: list roles: %w", err)
	}
	for _, r := range roles {
		if err := e.exec(ctx, fmt.Sprintf("ALTER ROLE %s WITH%s", qi(r), e.limit)); err != nil && !db.IsCode(err, "42704") {
			return err
		}
	}
	return nil
}
