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
	"provisioner/platform/testutil"
)

func TestDeletingAUserDropsTheirDatabases(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	u := a.Register(t)
	it := create(t, a, u.Token, "mysql")
	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Settle(10 * time.Second)
	assert.False(t, existsOnEngine(t, "mysql", it.DatabaseName))
	var live int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM database_instances WHERE user_id = ? AND status <> 'Deleted'", u.ID).Scan(&live))
	assert.Zero(t, live)

	// Each drop is audited as the owner's own delete would be, by the admin who deleted the user.
	var all, deleted []string
	require.NoError(t, a.DB.NewSelect().Table("database_instances").ColumnExpr("id::text").Where("user_id = ?", u.ID).
		Scan(context.Background(), &all))
	require.NoError(t, a.DB.NewSelect().Table("audit_events").Column("target_id").Where("action = 'database.deleted'").
		Where("user_id = ?", u.ID).Where("actor_user_id = (SELECT id FROM users WHERE email = ? AND deleted_at IS NULL)", apptest.AdminEmail).
		Where("details->>'reason' = 'user.deleted'").Scan(context.Background(), &deleted))
	assert.Contains(t, all, fmt.Sprint(it.ID))
	assert.ElementsMatch(t, all, deleted)
}

func TestAdminListAndDashboard(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	u := a.Register(t)
	create(t, a, u.Token, "mysql")
	r := a.Get(fmt.Sprintf("/api/database-instances?userId=%d&engine=mysql", u.ID), admin)
	require.Equal(t, http.StatusOK, r.Status)
	var p struct {
		Items      []item `json:"items"`
		TotalCount int    `json:"totalCount"`
	}
	r.Decode(t, &p)
	assert.Equal(t, 1, p.TotalCount)
	r = a.Get(fmt.Sprintf("/api/users/%d/dashboard", u.ID), admin)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Contains(t, string(r.Raw), `"databases":2`)
	r = a.Get("/api/metrics/platform", "")
	var m map[string]any
	r.Decode(t, &m)
	assert.GreaterOrEqual(t, m["databases"].(float64), 2.0)
	assert.Equal(t, 2.0, m["engines"])
}

// TestMyListIsCoherentAcrossReplicas: the list of one's databases is cached on every replica; each
// change answered by replica one (create, pause, resume, delete) is in the list replica two
// serves next, though replica two applies the change feed 150 ms late. A change made without the
// API (the usage refresher, an operator's SQL) reaches it too.
func TestMyListIsCoherentAcrossReplicas(t *testing.T) {
	kv := map[string]any{"Redis:KeyPrefix": "mine" + testutil.RandomSuffix()}
	one := start(t, kv)
	two := start(t, kv, apptest.WithFeedLag(150*time.Millisecond))
	u := one.Register(t)
	listOnTwo := func() []item {
		r := two.Do(apptest.Request{Method: http.MethodGet, Path: "/api/me/databases", Token: u.Token, SkipSync: true})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		var items []item
		r.Decode(t, &items)
		return items
	}
	statusOf := func(items []item, id int64) string {
		for _, x := range items {
			if x.ID == id {
				return x.Status
			}
		}
		return "absent"
	}
	settle := func() { // everything applied, and the list cached on replica two
		require.NoError(t, two.Bus.Sync(context.Background()))
		listOnTwo()
	}
	settle()
	r := one.Do(apptest.Request{Method: http.MethodPost, Path: "/api/me/databases", Token: u.Token,
		Body: map[string]any{"engine": "postgres", "name": "coherent"}, SkipSync: true})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var it item
	r.Decode(t, &it)
	assert.Equal(t, "Active", statusOf(listOnTwo(), it.ID), "created")
	for _, step := range []struct{ path, status string }{{"pause", "Paused"}, {"resume", "Active"}} {
		settle()
		r := one.Do(apptest.Request{Method: http.MethodPost, Path: fmt.Sprintf("/api/me/databases/%d/%s", it.ID, step.path),
			Token: u.Token, SkipSync: true})
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		assert.Equal(t, step.status, statusOf(listOnTwo(), it.ID), step.path)
	}
	settle()
	_, err := one.DB.ExecContext(context.Background(), "UPDATE database_instances SET name = 'renamed by hand' WHERE id = ?", it.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, x := range listOnTwo() {
			if x.ID == it.ID && x.Name == "renamed by hand" {
				return true
			}
		}
		return false
	}, 5*time.Second, 20*time.Millisecond, "a change made in SQL reaches the cache")
	settle()
	r = one.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/databases/%d", it.ID), Token: u.Token, SkipSync: true})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, "absent", statusOf(listOnTwo(), it.ID), "deleted")
}

// TestAdminUpdateRefusesABlankName: a rename to nothing but spaces is a 400 naming the field, as
// an empty name is, and the stored name is left alone (it was stored as "" before).
func TestAdminUpdateRefusesABlankName(t *testing.T) {
	a := start(t, nil)
	admin := a.AdminToken(t)
	u := a.Register(t)
	it := create(t, a, u.Token, "postgres")
	path := fmt.Sprintf("/api/database-instances/%d", it.ID)
	for _, name := range []string{"", " ", "   ", " \t "} {
		r := a.Do(apptest.Request{Method: "PUT", Path: path, Token: admin, Body: map[string]any{"name": name}})
		assert.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", name, r.Raw)
		assert.Contains(t, string(r.Raw), `"field":"name"`, "%q", name)
	}
	var got item
	a.Get(path, admin).Decode(t, &got)
	assert.Equal(t, "app data", got.Name, "nothing was written")
	r := a.Do(apptest.Request{Method: "PUT", Path: path, Token: admin, Body: map[string]any{"name": " reports 2 "}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Get(path, admin).Decode(t, &got)
	assert.Equal(t, "reports 2", got.Name)
}
