package provision_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"

	"provisioner/platform/fault"
	"provisioner/platform/provision"
)

type lockedRow struct {
	bun.BaseModel `bun:"table:lock_now_rows"`

	ID     int64  `bun:"id,pk,autoincrement"`
	UserID int64  `bun:"user_id"`
	Status string `bun:"status"`
}

// TestLockNowIsABusyConflictWhileAnotherHoldsTheRow: while another transaction holds a row,
// LockNow answers at once with a 409 saying busy (its caller's text, or provision.Busy when it
// names none); another user's row, or one in a hidden status, is not found.
func TestLockNowIsABusyConflictWhileAnotherHoldsTheRow(t *testing.T) {
	db, _ := setup(t)
	ctx := context.Background()
	_, err := db.Exec(`CREATE TABLE IF NOT EXISTS lock_now_rows (id bigserial PRIMARY KEY, user_id bigint NOT NULL, status text NOT NULL)`)
	require.NoError(t, err)
	live, gone := &lockedRow{UserID: 7, Status: "Active"}, &lockedRow{UserID: 7, Status: "Deleted"}
	_, err = db.NewInsert().Model(live).Exec(ctx)
	require.NoError(t, err)
	_, err = db.NewInsert().Model(gone).Exec(ctx)
	require.NoError(t, err)
	lockNow := func(id, userID int64, busy string) error {
		return db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			_, err := provision.LockNow[lockedRow](ctx, tx, id, userID, "UPDATE", "Row not found", busy, "Deleted")
			return err
		})
	}
	require.NoError(t, lockNow(live.ID, 7, ""), "free: locked")

	hold, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer hold.Rollback() //nolint:errcheck
	_, err = hold.ExecContext(ctx, "SELECT 1 FROM lock_now_rows WHERE id = ? FOR UPDATE", live.ID)
	require.NoError(t, err)
	for busy, want := range map[string]string{"": provision.Busy, "The row is being changed": "The row is being changed"} {
		fe, ok := fault.As(lockNow(live.ID, 7, busy))
		require.True(t, ok, "a domain error, not a 500")
		assert.Equal(t, fault.KindConflict, fe.Kind)
		assert.Equal(t, want, fe.Message)
	}
	for _, tc := range []struct{ id, user int64 }{{live.ID, 8}, {gone.ID, 7}} {
		fe, ok := fault.As(lockNow(tc.id, tc.user, ""))
		require.True(t, ok)
		assert.Equal(t, fault.KindNotFound, fe.Kind)
	}
}
