package admin_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestAdminsEditingEachOtherAtOnce: two Admins editing each other at the same moment (a rename
// both ways, or one deleting the other while that one renames the first) deadlocked in
// PostgreSQL, and one of them got 503 after a second: each request held its caller's row (FOR
// KEY SHARE, authn.LockCaller) and waited for the other's (FOR UPDATE). Every change of a user now
// takes the advisory lock of lockAdmins first, as a deletion does, so the second waits before it
// holds any row. A transaction of the test holds both rows FOR NO KEY UPDATE (which lets the
// callers' KEY SHARE locks through, not the FOR UPDATE) until both requests wait, so that both
// are past their caller's lock when they go on.
func TestAdminsEditingEachOtherAtOnce(t *testing.T) {
	a := apptest.Start(t)
	root := a.AdminToken(t)
	ctx := context.Background()
	cases := []struct {
		name  string
		first func(tok string, target int64) apptest.Request
		want  [][]int // the answers, in either order, when one or the other goes first
	}{
		{"rename each other", func(tok string, target int64) apptest.Request {
			return apptest.Request{Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", target), Token: tok,
				Body: map[string]any{"fullName": "Renamed"}}
		}, [][]int{{http.StatusOK, http.StatusOK}}},
		{"delete the one renaming", func(tok string, target int64) apptest.Request {
			return apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/users/%d", target), Token: tok}
		}, [][]int{{http.StatusOK, http.StatusUnauthorized}, {http.StatusOK, http.StatusOK}}}, // the rename first: both go
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			x, xt := signIn(t, a, root, "Admin")
			y, yt := signIn(t, a, root, "Admin")
			tx, err := a.DB.BeginTx(ctx, &sql.TxOptions{})
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			_, err = tx.ExecContext(ctx, "SELECT id FROM users WHERE id IN (?, ?) FOR NO KEY UPDATE", x, y)
			require.NoError(t, err)

			reqs := []apptest.Request{tc.first(xt, y), {Method: http.MethodPut, Path: fmt.Sprintf("/api/users/%d", x),
				Token: yt, Body: map[string]any{"fullName": "Renamed Too"}}}
			res := make(chan int, len(reqs))
			for _, r := range reqs {
				r.SkipSync = true
				go func() { res <- a.Do(r).Status }()
			}
			a.AwaitLockWaits(t, 2, "", nil)
			require.NoError(t, tx.Commit())
			got := []int{<-res, <-res}
			sort.Ints(got)
			assert.Contains(t, tc.want, got, "no deadlock (503)")
		})
	}
}
