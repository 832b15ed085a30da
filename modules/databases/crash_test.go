package databases_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/databases"
	"provisioner/platform/provision/provisiontest"
	"provisioner/platform/testutil"
)

func TestEngineDownRegistrationStillSucceedsAndFinisherCompletes(t *testing.T) {
	// The engine is unreachable: the user is registered, the database stays Provisioning.
	down := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:TenantPostgres": "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable"}))
	r := down.Post("/api/auth/register", "", map[string]any{"fullName": "Patient", "email": "patient-" + testutil.RandomSuffix() + "@example.test", "password": "a-patient-passphrase-3"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var d struct {
		UserID         int64 `json:"userId"`
		TenantDatabase item  `json:"tenantDatabase"`
	}
	r.Decode(t, &d)
	assert.Equal(t, "Provisioning", d.TenantDatabase.Status)
	assert.NotEmpty(t, d.TenantDatabase.ErrorMessage)

	// The engine comes back (a replica configured with it): the finisher completes the database.
	up := start(t, nil)
	_, err := up.DB.Exec("UPDATE database_instances SET next_attempt_at = now() WHERE id = ?", d.TenantDatabase.ID)
	require.NoError(t, err)
	up.Settle(10 * time.Second)
	var status string
	require.NoError(t, up.DB.QueryRow("SELECT status FROM database_instances WHERE id = ?", d.TenantDatabase.ID).Scan(&status))
	assert.Equal(t, "Active", status)
	assert.True(t, existsOnEngine(t, "postgres", d.TenantDatabase.DatabaseName))

	// With attempts exhausted, a database that cannot be made is Failed, its error kept.
	failing := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:TenantPostgres": "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable", "Finisher:MaxAttempts": 1}))
	r = failing.Post("/api/auth/register", "", map[string]any{"fullName": "Unlucky", "email": "unlucky-" + testutil.RandomSuffix() + "@example.test", "password": "an-unlucky-passphrase-4"})
	require.Equal(t, http.StatusCreated, r.Status)
	r.Decode(t, &d)
	assert.Equal(t, "Failed", d.TenantDatabase.Status)
	assert.NotEmpty(t, d.TenantDatabase.ErrorMessage)
}

// TestCrashBetweenIntentAndEngineIsFinishedOnce covers both crash windows on both engines: before
// the engine call (only the intent is stored) and after it (the engine has the database and its
// role or user, the outcome was never recorded: the role is adopted, on MariaDB through the
// refused CREATE USER). The finisher completes each exactly once and the stored password works.
func TestCrashBetweenIntentAndEngineIsFinishedOnce(t *testing.T) {
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&engines)))
	for _, engine := range []string{"postgres", "mysql"} {
		t.Run(engine, func(t *testing.T) {
			u := a.Register(t)
			it := create(t, a, u.Token, engine)
			rv := revealPassword(t, a, u.Token, it.ID)
			// Window 2: pretend the outcome was lost after the engine made the database.
			_, err := a.DB.Exec("UPDATE database_instances SET status = 'Provisioning', next_attempt_at = now() WHERE id = ?", it.ID)
			require.NoError(t, err)
			a.Settle(5 * time.Second)
			var status string
			require.NoError(t, a.DB.QueryRow("SELECT status FROM database_instances WHERE id = ?", it.ID).Scan(&status))
			assert.Equal(t, "Active", status, "the existing database and role are adopted")
			_, err = connect(t, engine, it, rv.DatabaseUser, rv.Password)
			assert.NoError(t, err)

			// Window 1: the row is Provisioning and the engine has nothing, as if the process died
			// between storing the intent and calling the engine.
			it2 := create(t, a, u.Token, engine)
			require.NoError(t, engines.Get(engine).Drop(context.Background(), it2.DatabaseName, it2.DatabaseUser))
			_, err = a.DB.Exec("UPDATE database_instances SET status = 'Provisioning', next_attempt_at = now() WHERE id = ?", it2.ID)
			require.NoError(t, err)
			a.Settle(5 * time.Second)
			require.NoError(t, a.DB.QueryRow("SELECT status FROM database_instances WHERE id = ?", it2.ID).Scan(&status))
			assert.Equal(t, "Active", status)
			assert.True(t, existsOnEngine(t, engine, it2.DatabaseName))
			rv2 := revealPassword(t, a, u.Token, it2.ID)
			_, err = connect(t, engine, it2, rv2.DatabaseUser, rv2.Password)
			assert.NoError(t, err)

			var created int
			require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'database.created' AND target_id = ?", fmt.Sprint(it2.ID)).Scan(&created))
			assert.Equal(t, 2, created, "one create per attempt that reached the engine, never a second database")
		})
	}
}

// TestProvisionerSuite runs the suite every provisioner passes, on the PostgreSQL engine.
func TestProvisionerSuite(t *testing.T) {
	var prov *databases.Provisioner
	var engines *databases.Engines
	a := start(t, nil, apptest.WithFx(fx.Populate(&prov, &engines)))
	admin := a.AdminToken(t)
	u := a.Register(t)
	name := func(t *testing.T, id int64) string {
		var n string
		require.NoError(t, a.DB.QueryRow("SELECT database_name FROM database_instances WHERE id = ?", id).Scan(&n))
		return n
	}
	provisiontest.Run(t, provisiontest.Harness{
		DB: a.DB, Provisioner: prov, Created: "Active", Deleted: "Deleted",
		// A stored intent whose engine work never happened: created through the API, then undone on
		// the engine and set back to Provisioning (the sealed password stays valid).
		NewRow: func(t *testing.T) int64 {
			r := a.Post("/api/database-instances", admin, map[string]any{"userId": u.ID, "engine": "postgres"})
			require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
			var it item
			r.Decode(t, &it)
			require.NoError(t, engines.Get("postgres").Drop(context.Background(), it.DatabaseName, it.DatabaseUser))
			_, err := a.DB.Exec("UPDATE database_instances SET status = 'Provisioning' WHERE id = ?", it.ID)
			require.NoError(t, err)
			return it.ID
		},
		MarkDeleting: func(t *testing.T, id int64) {
			_, err := a.DB.Exec("UPDATE database_instances SET status = 'Deleting' WHERE id = ?", id)
			require.NoError(t, err)
		},
		External: func(t *testing.T, id int64) int {
			if existsOnEngine(t, "postgres", name(t, id)) {
				return 1
			}
			return 0
		},
		Status: func(t *testing.T, id int64) string {
			var s string
			require.NoError(t, a.DB.QueryRow("SELECT status FROM database_instances WHERE id = ?", id).Scan(&s))
			return s
		},
	})
}
