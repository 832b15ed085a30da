package databases_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
)

// TestReadOnlyRevokesWhatTheOwnerGranted: before its PostgreSQL database went over its quota,
// the owner granted everything on a table, a sequence, a large object, schema public, a schema of
// its own and the database (CREATE, TEMPORARY) to PUBLIC and to another tenant's role, which
// created a table of its own there. Once the usage refresh switched the database read-only,
// neither the owner (a member of PUBLIC) nor the other tenant may write, create a table, a
// schema or a temporary table, advance the sequence or write into the large object, even with
// default_transaction_read_only off; both still read. Back under the quota the owner writes
// again (and owns the other tenant's table); the other tenant's grants are not given back.
func TestReadOnlyRevokesWhatTheOwnerGranted(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	_, otherRv, _ := ownedDatabase(t, a, "postgres")
	it, rv, owner := ownedDatabase(t, a, "postgres",
		"CREATE TABLE big (a text)", "GRANT ALL ON big TO PUBLIC",
		"CREATE SEQUENCE sq", "GRANT ALL ON SEQUENCE sq TO PUBLIC",
		"GRANT ALL ON SCHEMA public TO PUBLIC",
		"CREATE SCHEMA s3", "GRANT ALL ON SCHEMA s3 TO PUBLIC")
	var lo int64
	require.NoError(t, owner.QueryRow("SELECT lo_from_bytea(0, 'x')").Scan(&lo))
	for _, s := range []string{
		fmt.Sprintf("GRANT CONNECT, TEMPORARY ON DATABASE %s TO PUBLIC", it.DatabaseName),
		fmt.Sprintf("GRANT CREATE ON DATABASE %s TO %s", it.DatabaseName, otherRv.DatabaseUser),
		fmt.Sprintf("GRANT ALL ON big, sq TO %s WITH GRANT OPTION", otherRv.DatabaseUser),
		fmt.Sprintf("GRANT SELECT, UPDATE ON LARGE OBJECT %d TO PUBLIC", lo),
	} {
		_, err := owner.Exec(s)
		require.NoError(t, err, s)
	}
	stranger, err := connect(t, "postgres", it, otherRv.DatabaseUser, otherRv.Password)
	require.NoError(t, err, "the other tenant connects through PUBLIC's CONNECT")
	for _, s := range []string{"CREATE TABLE s3.theirs (a text)", "INSERT INTO big VALUES ('from the other tenant')",
		fmt.Sprintf("BEGIN; SELECT lowrite(lo_open(%d, 131072), 'more'); COMMIT", lo)} {
		_, err := stranger.Exec(s)
		require.NoError(t, err, "writable: %s", s)
	}

	require.NoError(t, usage.Refresh(ctx))
	setMaxSpace(t, a, admin, it.ID, 1<<20)
	require.NoError(t, usage.Refresh(ctx))
	require.True(t, adminItem(t, a, admin, it.ID).ReadOnly, "over the quota: read-only")

	for _, who := range []struct{ user, password string }{{rv.DatabaseUser, rv.Password}, {otherRv.DatabaseUser, otherRv.Password}} {
		conn, err := connect(t, "postgres", it, who.user, who.password)
		require.NoError(t, err, "%s still connects", who.user)
		for _, s := range []string{
			"INSERT INTO big VALUES ('more')",
			"UPDATE big SET a = 'more'",
			"INSERT INTO s3.theirs VALUES ('more')",
			"CREATE TABLE public.evil (a text)",
			"CREATE TABLE s3.evil (a text)",
			"CREATE SCHEMA evil",
			"CREATE TEMP TABLE evil (a text)",
			"SELECT nextval('sq')",
			"SELECT setval('sq', 100)",
			fmt.Sprintf("BEGIN; SELECT lowrite(lo_open(%d, 131072), 'more'); COMMIT", lo),
			fmt.Sprintf("GRANT INSERT ON big TO %s", who.user),
		} {
			_, _ = conn.Exec("SET default_transaction_read_only = off")
			_, err = conn.Exec(s)
			_, _ = conn.Exec("ROLLBACK")
			if s[:5] == "GRANT" { // a grant without the right to give is a warning: the insert tells
				_, err = conn.Exec("INSERT INTO big VALUES ('more')")
			}
			assert.Error(t, err, "%s while read-only: %s", who.user, s)
		}
		var n int
		require.NoError(t, conn.QueryRow("SELECT count(*) FROM big").Scan(&n), "%s still reads", who.user)
		assert.Equal(t, 1, n)
	}
	_, err = stranger.Exec("DELETE FROM big")
	assert.Error(t, err, "the other tenant's session was ended, and its DELETE is revoked too")

	setMaxSpace(t, a, admin, it.ID, 1<<30)
	require.NoError(t, usage.Refresh(ctx))
	require.False(t, adminItem(t, a, admin, it.ID).ReadOnly, "back under the quota")
	owner, err = connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	for _, s := range []string{"INSERT INTO big VALUES ('again')", "INSERT INTO s3.theirs VALUES ('mine now')",
		"CREATE TABLE s3.later (a text)", "CREATE TEMP TABLE tmp (a text)", "SELECT nextval('sq')"} {
		_, err := owner.Exec(s)
		assert.NoError(t, err, "writable again: %s", s)
	}
	stranger, err = connect(t, "postgres", it, otherRv.DatabaseUser, otherRv.Password)
	require.NoError(t, err, "CONNECT was not revoked")
	_, err = stranger.Exec("INSERT INTO big VALUES ('from the other tenant')")
	assert.Error(t, err, "the grants revoked at read-only are not given back")
}

// TestLockedDatabaseDoesNotHoldUpOtherSwitches: three databases go over their quota in one
// refresh. The tenant of the first holds a lock on one of its tables in an open transaction
// (LOCK TABLE … IN ACCESS SHARE MODE, then idle); the second is being changed by another
// process (its catalogue lock, the engine's advisory lock, is held), and the refresh's time runs
// out while its switch waits; the third is plain. The tenant's session is ended and its
// database read-only, the plain one read-only, the stuck one still writable (tried again
// later), and every figure is recorded; once the other process is done, the next refresh
// switches the stuck one.
func TestLockedDatabaseDoesNotHoldUpOtherSwitches(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	locked, _, lockedOwner := ownedDatabase(t, a, "postgres", "CREATE TABLE x (a int)")
	stuck, _, _ := ownedDatabase(t, a, "postgres")
	plain, _, _ := ownedDatabase(t, a, "postgres", "CREATE TABLE y (a int)")
	require.NoError(t, usage.Refresh(context.Background()))

	tx, err := lockedOwner.Begin()
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	_, err = tx.Exec("LOCK TABLE x IN ACCESS SHARE MODE")
	require.NoError(t, err)
	other := holdInTx(t, fmt.Sprintf("SELECT pg_advisory_xact_lock(x'70726f76'::int, hashtext('%s'))", stuck.DatabaseName))
	for _, it := range []item{locked, stuck, plain} {
		setMaxSpace(t, a, admin, it.ID, 1<<20)
	}

	// The refresh's time runs out while the stuck switch waits.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	engine := enginePool(t, "postgres")
	go func() {
		defer cancel()
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
			var waiting bool
			_ = engine.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'
				AND query LIKE 'SELECT pg_catalog.pg_advisory_lock%')`).Scan(&waiting)
			if waiting {
				return
			}
		}
	}()
	began := time.Now()
	err = usage.Refresh(ctx)
	t.Logf("refresh: %v in %s", err, time.Since(began))
	for _, it := range []item{locked, stuck, plain} {
		got := adminItem(t, a, admin, it.ID)
		assert.Equal(t, it.ID != stuck.ID, got.ReadOnly, "%s read-only", it.DatabaseName)
		assert.Greater(t, got.UsedSpaceBytes, int64(1<<20), "%s is measured", it.DatabaseName)
	}
	_, err = tx.Exec("SELECT 1")
	assert.Error(t, err, "the locking session was ended")

	require.NoError(t, other.Rollback())
	require.NoError(t, usage.Refresh(context.Background()))
	assert.True(t, adminItem(t, a, admin, stuck.ID).ReadOnly, "switched at the next refresh")
}
