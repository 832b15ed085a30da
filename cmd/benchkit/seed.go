package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5"
)

// seed fills users and database_instances of the control database at dsn with n rows each (one
// database per user) through COPY: triggers off for the session (session_replication_role), the
// tables' secondary indexes dropped for the load and built again after it, then VACUUM ANALYZE.
// It prints the seconds it took.
func seed(dsn string, n int) {
	ctx := context.Background()
	start := time.Now()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	must := func(sql string) {
		if _, err := conn.Exec(ctx, sql); err != nil {
			log.Fatalf("%s: %v", sql, err)
		}
	}
	must("SET session_replication_role = replica")
	must("SET maintenance_work_mem = '256MB'")
	// Secondary indexes not backing a constraint: dropped for the load, rebuilt from their definitions.
	rows, err := conn.Query(ctx, `SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i
		WHERE i.indrelid IN ('users'::regclass, 'database_instances'::regclass)
		AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`)
	if err != nil {
		log.Fatal(err)
	}
	var names, defs []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			log.Fatal(err)
		}
		names, defs = append(names, name), append(defs, def)
	}
	if err := rows.Err(); err != nil {
		log.Fatal(err)
	}
	for _, name := range names {
		must("DROP INDEX " + name)
	}
	var base, dbBase int64
	if err := conn.QueryRow(ctx, "SELECT (SELECT coalesce(max(id), 0) FROM users), (SELECT coalesce(max(id), 0) FROM database_instances)").
		Scan(&base, &dbBase); err != nil {
		log.Fatal(err)
	}
	created := time.Now().Add(-time.Duration(n) * time.Second)
	users := rowsOf(n, func(i int) []any {
		return []any{base + int64(i), fmt.Sprintf("seed%d@scale.test", i), fmt.Sprintf("Seed User %d", i),
			fmt.Sprintf("Org %d", i%500), "User", int64(1), created.Add(time.Duration(i) * time.Second)}
	})
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"users"},
		[]string{"id", "email", "full_name", "organization", "role", "security_stamp", "created_at"}, users); err != nil {
		log.Fatalf("copy users: %v", err)
	}
	// One in ten databases is Deleted, one Failed, one Paused: the lists and counts filter on status.
	statuses := []string{"Active", "Active", "Active", "Active", "Active", "Active", "Active", "Paused", "Failed", "Deleted"}
	dbs := rowsOf(n, func(i int) []any {
		id := dbBase + int64(i)
		return []any{id, base + int64(i), "seed", "postgres", fmt.Sprintf("seed_%d", id), fmt.Sprintf("seed_%d", id),
			"v1.x.y", statuses[i%len(statuses)], int64(536870912), created.Add(time.Duration(i) * time.Second)}
	})
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{"database_instances"},
		[]string{"id", "user_id", "name", "engine", "database_name", "database_user", "password_sealed", "status",
			"max_space_bytes", "created_at"}, dbs); err != nil {
		log.Fatalf("copy database_instances: %v", err)
	}
	for _, def := range defs {
		must(def)
	}
	must("SELECT setval(pg_get_serial_sequence('users', 'id'), (SELECT max(id) FROM users))")
	must("SELECT setval(pg_get_serial_sequence('database_instances', 'id'), (SELECT max(id) FROM database_instances))")
	must("VACUUM ANALYZE users")
	must("VACUUM ANALYZE database_instances")
	fmt.Printf("%.1f\n", time.Since(start).Seconds())
}

// rowsOf is a COPY source of n rows, row(1) … row(n).
func rowsOf(n int, row func(i int) []any) pgx.CopyFromSource {
	i := 0
	return pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		i++
		return row(i), nil
	})
}
