package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestMySQLDropDoesNotWaitForATenantsLock: a session holds a metadata lock on a table of a
// MySQL/MariaDB tenant database (an open transaction that read it; here an administrator's
// session, which the drop does not end, standing in for a tenant session that reconnected
// between the drop ending the tenant's sessions and its DROP DATABASE). DELETE answers 502
// within seconds, with the database Deleting and its account locked, so its password no longer
// logs in; once the lock is released, DELETE again drops it.
func TestMySQLDropDoesNotWaitForATenantsLock(t *testing.T) {
	a := start(t, nil)
	ctx := context.Background()
	u := a.Register(t)
	it := create(t, a, u.Token, "mysql")
	rv := revealPassword(t, a, u.Token, it.ID)
	owner, err := connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("CREATE TABLE t (i int)")
	require.NoError(t, err)

	holder, err := enginePool(t, "mysql").BeginTx(ctx, nil)
	require.NoError(t, err)
	defer holder.Rollback() //nolint:errcheck
	var n int
	require.NoError(t, holder.QueryRow(fmt.Sprintf("SELECT count(*) FROM `%s`.t", it.DatabaseName)).Scan(&n))

	del := func() *apptest.Resp {
		return a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", it.ID), Token: u.Token})
	}
	began := time.Now()
	r := del()
	took := time.Since(began)
	assert.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Less(t, took, 12*time.Second, "the drop waits for the lock a bounded time")
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM database_instances WHERE id = ?", it.ID).Scan(&status))
	assert.Equal(t, "Deleting", status)
	_, err = connect(t, "mysql", it, rv.DatabaseUser, rv.Password)
	assert.Error(t, err, "the tenant cannot log in again while its drop is pending")

	require.NoError(t, holder.Rollback())
	r = del()
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.False(t, existsOnEngine(t, "mysql", it.DatabaseName), "the database and its user are gone")
}
