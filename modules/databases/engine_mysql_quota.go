package databases

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
)

// writerPrivs is what a database's owner and its full-access credentials are granted on its
// schema: everything on the schema but EVENT (and GRANT OPTION). An event runs by itself as its
// definer, even while the definer's account is locked, so a paused tenant's events went on
// running (and ALTER EVENT by the admin would make the admin their definer); tenants are not
// promised events. MariaDB adds DELETE HISTORY (system-versioned tables), which MySQL lacks.
func (e *mysqlEngine) writerPrivs(ctx context.Context) (string, error) {
	const privs = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, REFERENCES, INDEX, ALTER, CREATE TEMPORARY TABLES, " +
		"LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE, TRIGGER"
	e.mu.Lock()
	flavor := e.flavor
	e.mu.Unlock()
	if flavor == "" {
		v, err := e.Version(ctx)
		if err != nil {
			return "", err
		}
		flavor = "mysql"
		if strings.Contains(strings.ToLower(v), "mariadb") {
			flavor = "mariadb"
		}
		e.mu.Lock()
		e.flavor = flavor
		e.mu.Unlock()
	}
	if flavor == "mariadb" {
		return privs + ", DELETE HISTORY", nil
	}
	return privs, nil
}

// readOnlyPrivs is what a writer keeps over its quota: SELECT, and DELETE and DROP (DROP TABLE,
// TRUNCATE TABLE) so it can free space, and drop a table the server cannot measure (see
// mysqlMeasuredEngines). DROP creates nothing and grows nothing.
const readOnlyPrivs = "SELECT, DELETE, DROP, SHOW VIEW"

// SetReadOnly revokes every write privilege but keeps SELECT, DELETE and DROP, so the owner can
// free space; switching back grants everything again. It applies to every user that writes to the
// database (the owner and full-access credentials), not only the owner: a full-access
// credential has its own grants. Read-only credentials (SELECT, SHOW VIEW, never DELETE) are
// left alone both ways.
func (e *mysqlEngine) SetReadOnly(ctx context.Context, dbName, role string, readOnly bool) error {
	if err := checkNames(dbName, role); err != nil {
		return err
	}
	if err := e.escapeGrants(ctx, dbName); err != nil {
		return err
	}
	q := "SELECT User FROM mysql.db WHERE Db = ? AND Host = '%' AND Insert_priv = 'Y'"
	if !readOnly {
		q = "SELECT User FROM mysql.db WHERE Db = ? AND Host = '%' AND Insert_priv = 'N' AND Delete_priv = 'Y'"
	}
	rows, err := e.pool.QueryContext(ctx, q, grantDB(dbName))
	if err != nil {
		return fmt.Errorf("mysql: list writers: %w", err)
	}
	users := []string{role}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			rows.Close()
			return fmt.Errorf("mysql: list writers: %w", err)
		}
		if u != role && SafeName.MatchString(u) {
			users = append(users, u)
		}
	}
	rows.Close()
	privs, err := e.writerPrivs(ctx)
	if err != nil {
		return err
	}
	for _, u := range users {
		if !readOnly {
			if err := e.exec(ctx, fmt.Sprintf("GRANT %s ON %s TO %s", privs, onSchema(dbName), mqa(u))); err != nil {
				return err
			}
			continue
		}
		if err := e.exec(ctx,
			fmt.Sprintf("REVOKE ALL PRIVILEGES ON %s FROM %s", onSchema(dbName), mqa(u)),
			fmt.Sprintf("GRANT %s ON %s TO %s", readOnlyPrivs, onSchema(dbName), mqa(u))); err != nil {
			return err
		}
		if err := e.kill(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// usagePassDone implements usagePass: the grants, EVENT and limits of every live database are
// fixed, so later refreshes skip those steps.
func (e *mysqlEngine) usagePassDone() {
	e.mu.Lock()
	e.grantsEscaped, e.eventsRevoked, e.limitsSet = true, true, true
	e.mu.Unlock()
}

func (e *mysqlEngine) Usage(ctx context.Context, dbs []string) (map[string]Usage, error) {
	out := map[string]Usage{}
	if len(dbs) == 0 {
		return out, nil
	}
	e.mu.Lock()
	escaped := e.grantsEscaped
	e.mu.Unlock()
	if !escaped { // the refresher's first pass escapes the grants of an existing server
		if err := e.escapeGrants(ctx, dbs...); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	revoked := e.eventsRevoked
	e.mu.Unlock()
	if !revoked { // and takes EVENT from users granted everything before writerPrivs
		if err := e.revokeEvents(ctx, dbs); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	limited := e.limitsSet
	e.mu.Unlock()
	if !limited { // and gives the users made before the limit existed theirs
		if err := e.limitUsers(ctx, dbs); err != nil {
			return nil, err
		}
	}
	args := make([]any, 0, len(dbs))
	marks := strings.TrimSuffix(strings.Repeat("?,", len(dbs)), ",")
	for _, d := range dbs {
		args = append(args, d)
	}
	ts, err := e.tablespaceTable(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := e.pool.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("mysql usage: %w", err)
	}
	defer conn.Close()
	// MySQL 8 caches the figures of information_schema.tables for a day by default (and ANALYZE
	// TABLE, which a writable tenant may run, fills the cache): this session reads them afresh.
	// MariaDB and MySQL 5.7 have no such cache (error 1193, unknown variable).
	_, err = conn.ExecContext(ctx, "SET SESSION information_schema_stats_expiry = 0")
	switch {
	case err == nil:
		defer func() {
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION information_schema_stats_expiry = DEFAULT"); err != nil {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	case !isMySQLCode(err, 1193):
		return nil, fmt.Errorf("mysql usage: %w", err)
	}
	rows, err := conn.QueryContext(ctx, `
		SELECT s.schema_name, `+mysqlSchemaBytes(ts)+`,
		       EXISTS (SELECT 1 FROM information_schema.processlist p WHERE p.db = s.schema_name)
		FROM information_schema.schemata s `+mysqlFilesJoin(ts)+` WHERE s.schema_name IN (`+marks+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("mysql usage: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var u Usage
		if err := rows.Scan(&name, &u.Bytes, &u.Active); err != nil {
			return nil, fmt.Errorf("mysql usage: %w", err)
		}
		out[name] = u
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql usage: %w", err)
	}
	rows.Close()
	return out, e.unmeasured(ctx, conn, out, marks, args)
}

// mysqlMeasuredEngines are the storage engines (upper case) whose tables' size
// information_schema.tables reports truthfully. Any other engine (CSV, whose data_length stays 0
// while its file grows, CONNECT, FEDERATED, S3, SPIDER, ROCKSDB, plugins) is unmeasured.
var mysqlMeasuredEngines = []string{"INNODB", "MYISAM", "ARIA", "MEMORY", "MRG_MYISAM", "ARCHIVE", "BLACKHOLE", "SEQUENCE"}

// unmeasured records in out each schema's tables in an engine outside mysqlMeasuredEngines
// (views have no engine), at most 20 a schema.
func (e *mysqlEngine) unmeasured(ctx context.Context, conn *sql.Conn, out map[string]Usage, marks string, args []any) error {
	engines := make([]any, 0, len(args)+len(mysqlMeasuredEngines))
	engines = append(engines, args...)
	for _, m := range mysqlMeasuredEngines {
		engines = append(engines, m)
	}
	rows, err := conn.QueryContext(ctx, `SELECT table_schema, table_name, engine FROM information_schema.tables
		WHERE table_schema IN (`+marks+`) AND engine IS NOT NULL
		  AND UPPER(engine) NOT IN (`+strings.TrimSuffix(strings.Repeat("?,", len(mysqlMeasuredEngines)), ",")+`)
		ORDER BY table_schema, table_name`, engines...)
	if err != nil {
		return fmt.Errorf("mysql usage: unmeasured tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var schema, table, engine string
		if err := rows.Scan(&schema, &table, &engine); err != nil {
			return fmt.Errorf("mysql usage: unmeasured tables: %w", err)
		}
		u, ok := out[schema]
		if !ok || len(u.Unmeasured) >= 20 {
			continue
		}
		u.Unmeasured = append(u.Unmeasured, fmt.Sprintf("%s (%s)", table, engine))
		out[schema] = u
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql usage: unmeasured tables: %w", err)
	}
	return nil
}

// RefreshStats brings InnoDB's statistics of the schemas' tables up to date (ANALYZE TABLE), so
// that their data_length reflects rows deleted since: InnoDB refreshes them only now and then,
// and a read-only tenant may not run ANALYZE itself, so it stayed read-only after emptying its
// tables. Only InnoDB base tables are analyzed (MyISAM and Aria figures are exact); ANALYZE reads
// sampled index pages, writes nothing of the tenant's and runs no trigger. Names are quoted; the
// session waits at most 2 s for a table's lock (a tenant's open transaction) and it stops when ctx
// ends. Not replicated (NO_WRITE_TO_BINLOG).
func (e *mysqlEngine) RefreshStats(ctx context.Context, dbs []string) error {
	var schemas []any
	for _, d := range dbs {
		if SafeName.MatchString(d) {
			schemas = append(schemas, d)
		}
	}
	if len(schemas) == 0 {
		return nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(schemas)), ",")
	rows, err := e.pool.QueryContext(ctx, `SELECT table_schema, table_name FROM information_schema.tables
		WHERE table_schema IN (`+marks+`) AND table_type = 'BASE TABLE' AND engine = 'InnoDB'`, schemas...)
	if err != nil {
		return fmt.Errorf("mysql: list tables: %w", err)
	}
	var tables []string
	for rows.Next() {
		var s, t string
		if err := rows.Scan(&s, &t); err != nil {
			rows.Close()
			return fmt.Errorf("mysql: list tables: %w", err)
		}
		tables = append(tables, mqi(s)+"."+mqi(t))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql: list tables: %w", err)
	}
	if len(tables) == 0 {
		return nil
	}
	conn, err := e.pool.Conn(ctx)
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET SESSION lock_wait_timeout = 2"); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	defer func() {
		// The connection goes back to the pool: its own setting again, or it is discarded.
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION lock_wait_timeout = DEFAULT"); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	const batch = 32
	for len(tables) > 0 {
		n := min(batch, len(tables))
		res, err := conn.QueryContext(ctx, "ANALYZE NO_WRITE_TO_BINLOG TABLE "+strings.Join(tables[:n], ", "))
		if err != nil {
			return fmt.Errorf("mysql: analyze: %w", err)
		}
		for res.Next() { // one row per table: a table dropped meanwhile is a row, not an error
		}
		res.Close()
		if err := res.Err(); err != nil {
			return fmt.Errorf("mysql: analyze: %w", err)
		}
		tables = tables[n:]
	}
	return nil
}

// revokeEvents takes the EVENT privilege (see writerPrivs) from every user@'%' that has it on one
// of the schemas dbs (escaped names: escapeGrants has run). Events made before stay as they are.
func (e *mysqlEngine) revokeEvents(ctx context.Context, dbs []string) error {
	var schemas []any
	for _, d := range dbs {
		if SafeName.MatchString(d) {
			schemas = append(schemas, grantDB(d))
		}
	}
	if len(schemas) == 0 {
		return nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(schemas)), ",")
	rows, err := e.pool.QueryContext(ctx, "SELECT Db, User FROM mysql.db WHERE Host = '%' AND Event_priv = 'Y' AND Db IN ("+marks+")", schemas...)
	if err != nil {
		return fmt.Errorf("mysql: list event grants: %w", err)
	}
	var grants [][2]string
	for rows.Next() {
		var db, user string
		if err := rows.Scan(&db, &user); err != nil {
			rows.Close()
			return fmt.Errorf("mysql: list event grants: %w", err)
		}
		if SafeName.MatchString(user) {
			grants = append(grants, [2]string{db, user})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql: list event grants: %w", err)
	}
	for _, g := range grants {
		// g[0] is the stored (escaped) name: quote it as it is.
		if err := e.exec(ctx, fmt.Sprintf("REVOKE EVENT ON %s.* FROM %s", mqi(g[0]), mqa(g[1]))); err != nil && !isMySQLCode(err, 1141) {
			return err
		}
	}
	return nil
}

// limitUsers gives MAX_USER_CONNECTIONS maxConns to every user@'%' with privileges on one of the
// schemas dbs (their owners and access credentials) that has another limit, such as users made
// before there was one.
func (e *mysqlEngine) limitUsers(ctx context.Context, dbs []string) error {
	var schemas []any
	for _, d := range dbs {
		if SafeName.MatchString(d) {
			schemas = append(schemas, grantDB(d), d)
		}
	}
	if len(schemas) == 0 {
		return nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?,", len(schemas)), ",")
	args := append([]any{e.maxConns}, schemas...)
	rows, err := e.pool.QueryContext(ctx, `SELECT DISTINCT u.User FROM mysql.user u JOIN mysql.db d ON d.User = u.User AND d.Host = u.Host
		WHERE u.Host = '%' AND u.max_user_connections <> ? AND d.Db IN (`+marks+`)`, args...)
	if err != nil {
		return fmt.Errorf("mysql: list users: %w", err)
	}
	var users []string
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			rows.Close()
			return fmt.Errorf("mysql: list users: %w", err)
		}
		if SafeName.MatchString(u) {
			users = append(users, u)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("mysql: list users: %w", err)
	}
	for _, u := range users {
		if err := e.exec(ctx, fmt.Sprintf("ALTER USER %s%s", mqa(u), e.limit)); err != nil && !isMySQLCode(err, 1396) {
			return err
		}
	}
	return nil
}

// mysqlSchemaBytes is the space schema s takes, in bytes: its tables' data and indexes (less
// MyISAM/Aria data_free) and the stored text of its routines, views, triggers and events, which
// live outside the tables. InnoDB's sizes are statistics a tenant can freeze (STATS_AUTO_RECALC=0),
// so its tables count at least their tablespace files (ts, see mysqlFilesJoin) less their free
// extents: the larger of the two sums. Without ts (no InnoDB), the statistics alone.
func mysqlSchemaBytes(ts string) string {
	files := "0"
	if ts != "" {
		files = "COALESCE(f.file_bytes, 0)"
	}
	return `COALESCE((SELECT
		           COALESCE(SUM(CASE WHEN t.engine = 'InnoDB' THEN 0 ELSE t.data_length + t.index_length -
		             CASE WHEN t.engine IN ('MyISAM', 'Aria') THEN COALESCE(t.data_free, 0) ELSE 0 END END), 0)
		           + GREATEST(COALESCE(SUM(CASE WHEN t.engine = 'InnoDB' THEN t.data_length + t.index_length ELSE 0 END), 0),
		                      ` + files + ` - COALESCE(SUM(CASE WHEN t.engine = 'InnoDB' THEN COALESCE(t.data_free, 0) ELSE 0 END), 0))
		         FROM information_schema.tables t WHERE t.table_schema = s.schema_name), 0)
		     + COALESCE((SELECT SUM(COALESCE(LENGTH(r.routine_definition), 0) + COALESCE(LENGTH(r.routine_comment), 0))
		         FROM information_schema.routines r WHERE r.routine_schema = s.schema_name), 0)
		     + COALESCE((SELECT SUM(COALESCE(LENGTH(p.dtd_identifier), 0) + COALESCE(LENGTH(p.parameter_name), 0))
		         FROM information_schema.parameters p WHERE p.specific_schema = s.schema_name), 0)
		     + COALESCE((SELECT SUM(COALESCE(LENGTH(v.view_definition), 0))
		         FROM information_schema.views v WHERE v.table_schema = s.schema_name), 0)
		     + COALESCE((SELECT SUM(COALESCE(LENGTH(g.action_statement), 0))
		         FROM information_schema.triggers g WHERE g.trigger_schema = s.schema_name), 0)
		     + COALESCE((SELECT SUM(COALESCE(LENGTH(v.event_definition), 0) + COALESCE(LENGTH(v.event_comment), 0))
		         FROM information_schema.events v WHERE v.event_schema = s.schema_name), 0)`
}

// mysqlFilesJoin joins to schemata s the size of each schema's InnoDB tablespace files as
// f.file_bytes, read once for the whole server (one row per file, kept in memory by InnoDB).
// A file's name is "<schema>/<table>" (tables and partitions; a tenant schema's name needs no
// encoding); the shared system and undo tablespaces have no "/" and belong to no schema.
func mysqlFilesJoin(ts string) string {
	if ts == "" {
		return ""
	}
	return `LEFT JOIN (SELECT SUBSTRING_INDEX(i.name, '/', 1) AS schema_name, SUM(i.file_size) AS file_bytes
		FROM information_schema.` + ts + ` i WHERE i.name LIKE '%/%' GROUP BY SUBSTRING_INDEX(i.name, '/', 1)) f
		ON f.schema_name = s.schema_name`
}

// mysqlTablespaces are the information_schema tables that list InnoDB's tablespace files with a
// FILE_SIZE column: MySQL 8 (INNODB_TABLESPACES), MariaDB and MySQL 5.7 (INNODB_SYS_TABLESPACES).
var mysqlTablespaces = []string{"INNODB_TABLESPACES", "INNODB_SYS_TABLESPACES"}

// tablespaceTable finds which of mysqlTablespaces this server has, once ("" when none: InnoDB
// is not loaded, and the statistics alone count).
func (e *mysqlEngine) tablespaceTable(ctx context.Context) (string, error) {
	e.mu.Lock()
	ts := e.tablespaces
	e.mu.Unlock()
	if ts != "" {
		return strings.TrimPrefix(ts, "-"), nil
	}
	found := "-"
	for _, name := range mysqlTablespaces {
		var n int
		if err := e.pool.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.columns
			WHERE table_schema = 'information_schema' AND table_name = ? AND column_name IN ('NAME', 'FILE_SIZE')`, name).Scan(&n); err != nil {
			return "", fmt.Errorf("mysql: look up tablespaces: %w", err)
		}
		if n == 2 {
			found = name
			break
		}
	}
	e.mu.Lock()
	e.tablespaces = found
	e.mu.Unlock()
	return strings.TrimPrefix(found, "-"), nil
}
