package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/modules/databases"
	"provisioner/platform/testutil/apptest"
)

// TestLastActivityIsTheTenantsOnly: lastActivity is "the last time a session was seen or the
// database grew". The PostgreSQL engine keeps an admin session of its own in a tenant database
// after granting it a read-only credential, and the usage refresh counted it: from then on every
// refresh set lastActivity of a database nobody used. Only a tenant's session counts.
func TestLastActivityIsTheTenantsOnly(t *testing.T) {
	var usage *databases.UsageRefresher
	a := start(t, nil, apptest.WithFx(fx.Populate(&usage)))
	admin := a.AdminToken(t)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	r := a.Post("/api/access-credentials", admin, map[string]any{"databaseInstanceId": it.ID, "readOnly": true})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))

	get := func() item {
		var got item
		a.Get(fmt.Sprintf("/api/database-instances/%d", it.ID), admin).Decode(t, &got)
		return got
	}
	for round := 1; round <= 2; round++ {
		require.NoError(t, usage.Refresh(context.Background()))
		assert.Nil(t, get().LastActivity, "refresh %d: nobody has used the database", round)
	}

	rv := revealPassword(t, a, u.Token, it.ID)
	_, err := connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	require.NoError(t, usage.Refresh(context.Background()))
	assert.NotNil(t, get().LastActivity, "the tenant's session is seen")
}
