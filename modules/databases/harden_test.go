package databases_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
	"provisioner/platform/db"
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
	for name, settings := range map[string][]string{
		"search_path": {"search_path = public, pg_catalog"},
		"role and timeouts": {"search_path = public, pg_catalog", "statement_timeout = '1ms'", "lock_timeout = '1ms'",
			"idle_in_transaction_session_timeout = '1ms'", "default_transaction_read_only = on", "exit_on_error = on"},
		"preload library": {"local_preload_libraries = 'no_such_library'"},
	} {
		t.Run(name, func(t *testing.T) {
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
			if name == "role and timeouts" {
				settings = append(settings, "role = "+rv.DatabaseUser)
			}
			for _, s := range settings {
				_, err = owner.Exec("ALTER DATABASE " + it.DatabaseName + " SET " + s)
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
			r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/access-credentials/%d", ro.ID), Token: admin})
			assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))

			// The owner's own session, with startup parameters overriding its database's settings.
			conn, err := db.Connector(fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable&statement_timeout=0&"+
				"default_transaction_read_only=off&role=none&local_preload_libraries=&exit_on_error=off",
				rv.DatabaseUser, rv.Password, it.Host, it.Port, it.DatabaseName))
			require.NoError(t, err)
			owner = sql.OpenDB(conn)
			defer owner.Close()
			rows, err := owner.Query("SELECT who, super FROM public.hooklog")
			require.NoError(t, err)
			for rows.Next() {
				var who string
				var super bool
				require.NoError(t, rows.Scan(&who, &super))
				t.Errorf("the tenant's function ran in a service session as %s (superuser: %v)", who, super)
			}
			require.NoError(t, rows.Close())
			var holders int
			require.NoError(t, owner.QueryRow("SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = $1", it.DatabaseName+"_quota").Scan(&holders))
			assert.Zero(t, holders, "the switch back completed")
			_, err = owner.Exec("CREATE TABLE after_switch (id int)")
			assert.NoError(t, err, "writable again")
		})
	}
}

// TestOtherTenantsGrantsDoNotBlockADelete: every tenant can read pg_roles, so knows the other
// tenants' role names, and may grant them something in its own database (a table, CONNECT on
// the database, default privileges); a tenant's login role may also own a table in its second
// database, whose owner let it connect and create there. Deleting the victim's database then
// answered 502 (DROP ROLE: SQLSTATE 2BP01) and stayed Deleting for ever with its
// role still able to log in. Now the delete succeeds, the victim's roles (and its credential's)
// are gone, and the other tenant's database keeps its objects and rows; a repeated drop (the
// finisher after a crash) succeeds too.
func TestOtherTenantsGrantsDoNotBlockADelete(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	admin := a.AdminToken(t)
	bob := a.Register(t)
	bobs := create(t, a, bob.Token, "postgres")
	bobsRV := revealPassword(t, a, bob.Token, bobs.ID)
	bobsCred := createCredential(t, a, admin, bobs, "")
	second := create(t, a, bob.Token, "postgres")
	secondRV := revealPassword(t, a, bob.Token, second.ID)

	alices, alicesRV, alice := ownedDatabase(t, a, "postgres", "CREATE TABLE bait (a int)", "INSERT INTO bait VALUES (1), (2)")
	for _, s := range []string{
		"GRANT SELECT ON bait TO " + bobs.DatabaseUser,
		"GRANT SELECT, INSERT ON bait TO " + bobsCred.Username,
		"GRANT CONNECT ON DATABASE " + alices.DatabaseName + " TO " + bobs.DatabaseUser,
		"ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO " + bobs.DatabaseUser,
	} {
		_, err := alice.Exec(s)
		require.NoError(t, err, s)
	}

	// Bob's first role owns a table in his second database: that database's owner let it in.
	sec, err := connect(t, "postgres", second, secondRV.DatabaseUser, secondRV.Password)
	require.NoError(t, err)
	for _, s := range []string{"GRANT CONNECT ON DATABASE " + second.DatabaseName + " TO " + bobs.DatabaseUser,
		"GRANT CREATE, USAGE ON SCHEMA public TO " + bobs.DatabaseUser} {
		_, err = sec.Exec(s)
		require.NoError(t, err, s)
	}
	first, err := connect(t, "postgres", second, bobsRV.DatabaseUser, bobsRV.Password)
	require.NoError(t, err, "the first database's role connects to the second")
	_, err = first.Exec("CREATE TABLE public.owned_elsewhere (id int)")
	require.NoError(t, err)
	_, err = first.Exec("INSERT INTO public.owned_elsewhere VALUES (7)")
	require.NoError(t, err)
	first.Close()

	r := a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", bobs.ID), Token: bob.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.False(t, existsOnEngine(t, "postgres", bobs.DatabaseName), "Bob's database and role are gone")
	assert.False(t, existsOnEngine(t, "postgres", bobsCred.Username), "his credential's role too")
	assert.NoError(t, engines.Get("postgres").Drop(context.Background(), bobs.DatabaseName, bobs.DatabaseUser), "repeatable")

	var n int
	require.NoError(t, alice.QueryRow("SELECT count(*) FROM bait").Scan(&n), "Alice's table is intact")
	assert.Equal(t, 2, n)
	_, err = alice.Exec("INSERT INTO bait VALUES (3)")
	assert.NoError(t, err)
	assert.NoError(t, tenantConnect(t, alices.DatabaseName, alicesRV.DatabaseUser, alicesRV.Password))

	require.NoError(t, sec.QueryRow("SELECT count(*) FROM public.owned_elsewhere").Scan(&n), "the table in Bob's second database is kept")
	assert.Equal(t, 1, n)
	_, err = sec.Exec("ALTER TABLE public.owned_elsewhere ADD COLUMN v int")
	assert.NoError(t, err, "and is its owner's now")

	// A delete that crashed after dropping the database, with the role still granted something
	// elsewhere: asking again finishes it.
	_, err = alice.Exec("GRANT SELECT ON bait TO " + second.DatabaseUser)
	require.NoError(t, err)
	sec.Close()
	_, err = enginePool(t, "postgres").Exec("DROP DATABASE " + second.DatabaseName + " WITH (FORCE)")
	require.NoError(t, err)
	r = a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", second.ID), Token: bob.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.False(t, existsOnEngine(t, "postgres", second.DatabaseName), "the second role is gone too")
	require.NoError(t, alice.QueryRow("SELECT count(*) FROM bait").Scan(&n))
	assert.Equal(t, 3, n)
}

// TestReadOnlyCredentialCreatesNothing: a read-only PostgreSQL credential that switches its
// session's read-only setting off still cannot write: not into the owner's tables, not a table
// of its own (schema public or temporary) and not a large object. Creating large objects was
// open to PUBLIC (only revoked while the database was over its quota), so lo_from_bytea stored
// 100 kB through a read-only credential. The owner and a full-access credential still create
// large objects, also after a trip over the quota and back.
func TestReadOnlyCredentialCreatesNothing(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	admin := a.AdminToken(t)
	it, rv, owner := ownedDatabase(t, a, "postgres", "CREATE TABLE keep (id int)", "INSERT INTO keep VALUES (1)")
	full := createCredential(t, a, admin, it, "")
	ro := createCredentialRO(t, a, admin, it)
	check := func(when string) {
		conn, err := connect(t, "postgres", it, ro.Username, ro.Password)
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.Exec("SET default_transaction_read_only = off")
		require.NoError(t, err)
		var n int
		require.NoError(t, conn.QueryRow("SELECT count(*) FROM keep").Scan(&n), "%s: it reads", when)
		for _, s := range []string{
			"SELECT pg_catalog.lo_from_bytea(0, pg_catalog.repeat('x', 100000)::bytea)",
			"SELECT pg_catalog.lo_create(0)",
			"SELECT pg_catalog.lo_creat(-1)",
			"SELECT pg_catalog.lo_import('/etc/hostname')",
			"INSERT INTO keep VALUES (2)",
			"CREATE TABLE mine (id int)",
			"CREATE TEMP TABLE mine (id int)",
			"CREATE SCHEMA mine",
		} {
			_, err = conn.Exec(s)
			assert.Error(t, err, "%s: %s", when, s)
		}
		var los int
		require.NoError(t, owner.QueryRow("SELECT count(*) FROM pg_catalog.pg_largeobject_metadata WHERE lomowner = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = $1)", ro.Username).Scan(&los))
		assert.Zero(t, los, "%s: no large object of the read-only credential", when)
		for _, who := range []credView{{Username: rv.DatabaseUser, Password: rv.Password}, full} {
			c, err := connect(t, "postgres", it, who.Username, who.Password)
			require.NoError(t, err)
			_, err = c.Exec("SELECT pg_catalog.lo_unlink(pg_catalog.lo_from_bytea(0, 'x'))")
			assert.NoError(t, err, "%s: %s creates large objects", when, who.Username)
			c.Close()
		}
	}
	check("writable")
	e := engines.Get("postgres")
	ctx := context.Background()
	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, true))
	require.NoError(t, e.SetReadOnly(ctx, it.DatabaseName, it.DatabaseUser, false))
	var err error
	owner, err = connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	check("back under the quota")
}

// TestTemplateDatabaseIsStillDeleted: a PostgreSQL tenant owns its database and may mark it a
// template (ALTER DATABASE … IS_TEMPLATE true), which DROP DATABASE refuses ("cannot drop a
// template database"): its delete answered 502 and stayed Deleting for ever. Now the mark is
// taken off first and the delete succeeds.
func TestTemplateDatabaseIsStillDeleted(t *testing.T) {
	a := start(t, nil)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	rv := revealPassword(t, a, u.Token, it.ID)
	owner, err := connect(t, "postgres", it, rv.DatabaseUser, rv.Password)
	require.NoError(t, err)
	_, err = owner.Exec("ALTER DATABASE " + it.DatabaseName + " IS_TEMPLATE true")
	require.NoError(t, err)
	owner.Close()
	r := a.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", it.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.False(t, existsOnEngine(t, "postgres", it.DatabaseName), "dropped on the engine")
}
