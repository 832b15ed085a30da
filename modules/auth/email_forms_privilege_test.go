package auth_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"provisioner/app/apptest"
	"provisioner/modules/auth"
	"provisioner/platform/testutil"
)

// The email-forms migration reported each collision through a pg_temp function, which needs the
// TEMP privilege on the control database: run by a role without it (a hardened database revokes
// TEMP from PUBLIC), the migration failed and the service did not start. It reports with a DO block
// now, which needs no privilege, and the WARNINGs still reach the log.
func TestEmailFormsMigrationNeedsNoTempPrivilege(t *testing.T) {
	dbURL, drop, err := testutil.CreateDatabase("auth_forms_notemp")
	require.NoError(t, err)
	role := "t_notemp_" + testutil.RandomSuffix()
	t.Cleanup(func() {
		drop()
		if admin, err := sql.Open("pgx", testutil.AdminURL()); err == nil {
			_, _ = admin.Exec(`DROP ROLE IF EXISTS "` + role + `"`)
			_ = admin.Close()
		}
	})
	a := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:Control": dbURL})) // the schema, migrated
	ctx := context.Background()
	u, _ := url.Parse(dbURL)
	dbName := strings.TrimPrefix(u.Path, "/")
	for _, stmt := range []string{
		`CREATE ROLE "` + role + `"`,
		`REVOKE TEMPORARY ON DATABASE "` + dbName + `" FROM PUBLIC`,
		`GRANT USAGE ON SCHEMA public TO "` + role + `"`,
		`GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO "` + role + `"`,
		`GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO "` + role + `"`,
	} {
		_, err := a.DB.ExecContext(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	sfx := testutil.RandomSuffix()
	owner, twin := "o-"+sfx+"@b\u00fccher.example", "o-"+sfx+"@xn--bcher-kva.example"
	ascii := "x-" + sfx + "@xn--bcher-kva.example"
	var ownerID, twinID int64
	require.NoError(t, a.DB.QueryRowContext(ctx, "INSERT INTO users (email, full_name) VALUES (?, 'Owner') RETURNING id", owner).Scan(&ownerID))
	_, err = a.DB.ExecContext(ctx, "INSERT INTO users (email, full_name) VALUES (?, 'Ascii')", ascii)
	require.NoError(t, err)
	require.NoError(t, a.DB.QueryRowContext(ctx, "INSERT INTO users (email, full_name) VALUES (?, 'Twin') RETURNING id", twin).Scan(&twinID))

	// A connection of its own (no temporary schema made yet), whose notices are kept.
	cfg, err := pgx.ParseConfig(dbURL)
	require.NoError(t, err)
	var mu sync.Mutex
	var warnings []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, n.Severity+": "+n.Message)
	}
	bdb := bun.NewDB(stdlib.OpenDB(*cfg), pgdialect.New())
	t.Cleanup(func() { _ = bdb.Close() })
	err = bdb.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.ExecContext(ctx, `SET LOCAL ROLE "`+role+`"`); err != nil {
			return err
		}
		return auth.NormalizeStoredEmails(ctx, tx)
	})
	require.NoError(t, err, "the migration runs without the TEMP privilege")

	var got string
	require.NoError(t, a.DB.QueryRowContext(ctx, "SELECT email FROM users WHERE email LIKE ?", "x-"+sfx+"@%").Scan(&got))
	assert.Equal(t, "x-"+sfx+"@b\u00fccher.example", got, "rewritten")
	require.NoError(t, a.DB.QueryRowContext(ctx, "SELECT email FROM users WHERE id = ?", twinID).Scan(&got))
	assert.Equal(t, twin, got, "a collision is left as it is")
	want := fmt.Sprintf("WARNING: users.id %d: email %q is spelt %s, the email of users.id %d; left as it is", twinID, twin, owner, ownerID)
	mu.Lock()
	defer mu.Unlock()
	assert.Contains(t, warnings, want, "the collision is reported")
}
