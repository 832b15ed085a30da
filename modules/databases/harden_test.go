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

// TestAdminSessionsIgnoreTheTenantsDatabaseSettings: a PostgreSQL tenant owns its database and
// may ALTER DATABASE … SET search_path = public, pg_catalog (and statement_timeout, role, …),
// which every later session there starts with. With a view public.pg_roles calling a function of
// its own, the service's superuser sessions inside the database (switching it to read-only over
// the quota and back, deleting a credential) ran the tenant's code as the superuser (a probe
// wrote to a file through COPY … TO PROGRAM); the tenant's 1 ms statement_timeout also failed
// the switch to read-only. Now those sessions pin their settings at connection start and name
// the catalogues with their schema: the function never runs and every operation succeeds.
func TestAdminSessionsIgnoreTheTenantsDatabaseSettings(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	admin := a.AdminToken(t)
	ctx := context.Background()
	it, rv, _ := ownedDatabase(t, a, "postgres",
		"CREATE TABLE hooklog (who text, super bool)",
		`CREATE FUNCTION public.hook() RETURNS bool LANGUAGE plpgsql AS $$BEGIN
			INSERT INTO public.hooklog SELECT current_user, rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user;
			RETURN true; END$$`,
		"CREATE VIEW public.pg_roles AS SELECT * FROM pg_catalog.pg_roles WHERE public.hook()",
		"CREATE VIEW public.pg_database AS SELECT * FROM pg_catalog.pg_database WHERE public.hook()",
		"CREATE FUNCTION public.shobj_description(oid, name) RETURNS text LANGUAGE sql AS $$SELECT CASE WHEN public.hook() THEN pg_catalog.shobj_description($1, $2) END$$")
	cred := createCredential(t, a, admin, it, "")
	owner, err := connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	for _, s := range []string{
		"ALTER DATABASE " + it.DatabaseName + " SET search_path = public, pg_catalog",
		"ALTER DATABASE " + it.DatabaseName + " SET statement_timeout = '1ms'",
		"ALTER DATABASE " + it.DatabaseName + " SET role = " + rv.DatabaseUser,
	} {
		_, err = owner.Exec(s)
		require.NoError(t, err, s)
	}
	owner.Close()

	e := engines.Get("postgres")
	assert.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, true), "over the quota")
	r := a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", cred.ID), Token: admin})
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.False(t, existsOnEngine(t, "postgres", cred.Username), "the credential's role is gone")
	assert.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, false), "back under the quota")
	ro := createCredentialRO(t, a, admin, it)

	owner, err = connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("SET statement_timeout = 0")
	require.NoError(t, err)
	var calls int
	require.NoError(t, owner.QueryRow("SELECT count(*) FROM public.hooklog").Scan(&calls))
	assert.Zero(t, calls, "the tenant's function never ran in the service's sessions")
	var holders int
	require.NoError(t, owner.QueryRow("SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = $1", it.DatabaseName+"_quota").Scan(&holders))
	assert.Zero(t, holders, "the switch back completed")
	_, err = owner.Exec("CREATE TABLE after_switch (id int)")
	assert.NoError(t, err, "writable again")

	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", ro.ID), Token: admin})
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	require.NoError(t, owner.QueryRow("SELECT count(*) FROM public.hooklog").Scan(&calls))
	assert.Zero(t, calls)
}
