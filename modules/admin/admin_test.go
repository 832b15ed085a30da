package admin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/platform/coherent"
	"provisioner/platform/provision"
	"provisioner/platform/summary"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

type page struct {
	Items      []map[string]any `json:"items"`
	Page       int              `json:"page"`
	PageSize   int              `json:"pageSize"`
	TotalCount int              `json:"totalCount"`
}

func createUser(t *testing.T, a *apptest.App, admin, name, role string) int64 {
	t.Helper()
	r := a.Post("/api/users", admin, map[string]any{"fullName": name, "email": strings.ToLower(strings.ReplaceAll(name, " ", ".")) + "-" + testutil.RandomSuffix() + "@corp.test",
		"password": "long-enough-password-42", "role": role, "organization": "Corp"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var u struct{ ID int64 }
	r.Decode(t, &u)
	return u.ID
}

func TestUserListFiltersAndPaging(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	tag := "zeta" + testutil.RandomSuffix()
	for i := 0; i < 5; i++ {
		createUser(t, a, admin, fmt.Sprintf("%s person %d", tag, i), "User")
	}
	createUser(t, a, admin, tag+" boss", "Admin")

	r := a.Get("/api/users?search="+strings.ToUpper(tag)+"&page=1&pageSize=4", admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var p page
	r.Decode(t, &p)
	assert.Equal(t, 6, p.TotalCount)
	assert.Len(t, p.Items, 4)
	assert.Equal(t, 1, p.Page)
	assert.Equal(t, 4, p.PageSize)
	for _, it := range p.Items {
		assert.NotContains(t, it, "passwordHash")
	}

	r = a.Get("/api/users?search="+tag+"&page=2&pageSize=4", admin)
	r.Decode(t, &p)
	assert.Len(t, p.Items, 2)

	r = a.Get("/api/users?search="+tag+"&role=Admin", admin)
	r.Decode(t, &p)
	require.Equal(t, 1, p.TotalCount)
	assert.Equal(t, "Admin", p.Items[0]["role"])

	for _, bad := range []string{"pageSize=101", "page=0", "role=Root"} {
		assert.Equal(t, http.StatusBadRequest, a.Get("/api/users?"+bad, admin).Status, bad)
	}
	// A % in the search is literal, not a wildcard.
	r = a.Get("/api/users?search=%25", admin)
	r.Decode(t, &p)
	assert.Zero(t, p.TotalCount)
}

func TestUserCRUDAndValidation(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	id := createUser(t, a, admin, "Crud Person", "User")

	r := a.Get(fmt.Sprintf("/api/users/%d", id), admin)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Contains(t, string(r.Raw), `"fullName":"Crud Person"`)

	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/users/%d", id), Token: admin,
		Body: map[string]any{"organization": "New Org", "id": 424242}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"organization":"New Org"`)
	assert.Contains(t, string(r.Raw), `"fullName":"Crud Person"`, "absent fields are left alone")

	cases := []struct {
		name   string
		body   map[string]any
		fields []string
	}{
		{"bad email and role", map[string]any{"fullName": "X", "email": "nope", "password": "long-enough-password-1", "role": "Root"}, []string{"email", "role"}},
		{"missing", map[string]any{}, []string{"fullName", "email", "password"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := a.Post("/api/users", admin, tc.body)
			require.Equal(t, http.StatusBadRequest, r.Status)
			assert.ElementsMatch(t, tc.fields, r.Fields())
		})
	}
	assert.Equal(t, http.StatusNotFound, a.Get("/api/users/99999999", admin).Status)
}

// An address with a display name, quotes or a comment is refused on create and update: stored as
// typed it would be a second account for the mailbox inside it.
func TestUserEmailMustBeABareAddress(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	victim := a.Register(t)
	id := createUser(t, a, admin, "Bare Person", "User")
	local, domain, _ := strings.Cut(victim.Email, "@")
	for _, addr := range []string{"Eve <" + victim.Email + ">", "<" + victim.Email + ">", victim.Email + " (Eve)",
		`"` + local + `"@` + domain, `"` + local + `\u0000"@` + domain} {
		t.Run(addr, func(t *testing.T) {
			r := a.Post("/api/users", admin, map[string]any{"fullName": "Eve", "email": addr, "password": "long-enough-password-42"})
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.Equal(t, []string{"email"}, r.Fields(), string(r.Raw))

			r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/users/%d", id), Token: admin,
				Body: map[string]any{"email": addr, "fullName": "Changed"}})
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.Equal(t, []string{"email"}, r.Fields(), string(r.Raw))
		})
	}
	r := a.Get(fmt.Sprintf("/api/users/%d", id), admin)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Contains(t, string(r.Raw), `"fullName":"Bare Person"`, "a refused update changes nothing")
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM users WHERE position(? in lower(email)) > 0", strings.ToLower(local)).Scan(&n))
	assert.Equal(t, 1, n)

	// A bare address in another case and with blanks is stored lower-cased.
	bare := "Bare." + testutil.RandomSuffix() + "@Corp.Test"
	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/users/%d", id), Token: admin, Body: map[string]any{"email": " " + bare + " "}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"email":"`+strings.ToLower(bare)+`"`)
}

func TestLastAdminCannotBeDemotedOrDeleted(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	// Demote every other admin the package's tests may have made, so the bootstrap admin is last.
	r := a.Get("/api/users?role=Admin&pageSize=100", admin)
	var p page
	r.Decode(t, &p)
	var bootstrapID int64
	for _, it := range p.Items {
		id := int64(it["id"].(float64))
		if it["email"] == apptest.AdminEmail {
			bootstrapID = id
			continue
		}
		a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/users/%d", id), Token: admin, Body: map[string]any{"role": "User"}})
	}
	require.NotZero(t, bootstrapID)
	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/users/%d", bootstrapID), Token: admin, Body: map[string]any{"role": "User"}})
	assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", bootstrapID), Token: admin})
	assert.Equal(t, http.StatusConflict, r.Status)

	// With a second admin, the first can go.
	second := createUser(t, a, admin, "Second Admin", "Admin")
	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/users/%d", second), Token: admin, Body: map[string]any{"role": "User"}})
	assert.Equal(t, http.StatusOK, r.Status)
}

func TestRoleChangeTakesEffectOnNextRequest(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	u := a.Register(t)
	assert.Equal(t, http.StatusForbidden, a.Get("/api/users", u.Token).Status)
	r := a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin, Body: map[string]any{"role": "Admin"}})
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, http.StatusOK, a.Get("/api/users", u.Token).Status, "the same token now carries the new role")
	a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin, Body: map[string]any{"role": "User"}})
	assert.Equal(t, http.StatusForbidden, a.Get("/api/users", u.Token).Status)
}

// releaser records which users were released, in the deleting transaction.
type releaser struct {
	mu    sync.Mutex
	users []int64
}

func (r *releaser) ReleaseUser(_ context.Context, _ bun.IDB, id int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.users = append(r.users, id)
	return nil
}

func TestDeleteUserRefusesSignInAndReleasesResources(t *testing.T) {
	rel := &releaser{}
	a := apptest.Start(t, apptest.WithFx(fx.Provide(provision.AsUserReleaser(func() *releaser { return rel }))))
	admin := a.AdminToken(t)
	u := a.Register(t)
	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Equal(t, []int64{u.ID}, rel.users)
	assert.Equal(t, http.StatusUnauthorized, a.Get("/api/me", u.Token).Status)
	assert.Equal(t, http.StatusUnauthorized, a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password}).Status)
	assert.Equal(t, http.StatusNotFound, a.Get(fmt.Sprintf("/api/users/%d", u.ID), admin).Status)
	// The email is free again.
	r = a.Post("/api/auth/register", "", map[string]any{"fullName": "Again", "email": u.Email, "password": u.Password})
	assert.Equal(t, http.StatusCreated, r.Status)
}

func TestAuditEventsAndTheAuditOfTheirChanges(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	u := a.Register(t)

	r := a.Get(fmt.Sprintf("/api/audit-events?userId=%d&action=user.registered", u.ID), admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var p page
	r.Decode(t, &p)
	require.Equal(t, 1, p.TotalCount)

	r = a.Post("/api/audit-events", admin, map[string]any{"action": "note.manual", "targetType": "user",
		"targetId": fmt.Sprint(u.ID), "userId": u.ID, "details": map[string]any{"text": "called the user"}})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var note struct {
		ID          int64          `json:"id"`
		ActorUserID int64          `json:"actorUserId"`
		Details     map[string]any `json:"details"`
	}
	r.Decode(t, &note)
	assert.NotZero(t, note.ActorUserID)
	// The create answer is the event as a later read answers it: occurredAt was set in Go with
	// nanoseconds (…03.758883344Z), which PostgreSQL keeps to the microsecond (…03.758883Z).
	created := r.Env.Data
	r = a.Get(fmt.Sprintf("/api/audit-events/%d", note.ID), admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.JSONEq(t, string(created), string(r.Env.Data), "the create answer equals the read")

	// The texts audit lists show refuse control and bidi characters ("\u202egnp.exe" shows as "exe.png").
	r = a.Post("/api/audit-events", admin, map[string]any{"action": "note\u202emanual", "targetType": "user\u0007", "targetId": "1"})
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.ElementsMatch(t, []string{"action", "targetType"}, r.Fields())
	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/audit-events/%d", note.ID), Token: admin,
		Body: map[string]any{"targetId": "7\u2066"}})
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.Equal(t, []string{"targetId"}, r.Fields())

	r = a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/audit-events/%d", note.ID), Token: admin,
		Body: map[string]any{"details": map[string]any{"text": "emailed the user"}}})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r = a.Get(fmt.Sprintf("/api/audit-events?action=audit.event.updated&pageSize=100"), admin)
	r.Decode(t, &p)
	found := false
	for _, it := range p.Items {
		if it["targetId"] == fmt.Sprint(note.ID) {
			raw, _ := json.Marshal(it["details"])
			assert.Contains(t, string(raw), "called the user", "the original survives in the change's record")
			found = true
		}
	}
	assert.True(t, found)

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/audit-events/%d", note.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, http.StatusNotFound, a.Get(fmt.Sprintf("/api/audit-events/%d", note.ID), admin).Status)
	r = a.Get("/api/audit-events?action=audit.event.deleted&pageSize=100", admin)
	assert.Contains(t, string(r.Raw), "emailed the user")

	// Time range: nothing before 2000.
	r = a.Get("/api/audit-events?to=2000-01-01T00:00:00Z", admin)
	r.Decode(t, &p)
	assert.Zero(t, p.TotalCount)
	assert.Equal(t, http.StatusBadRequest, a.Get("/api/audit-events?from=yesterday", admin).Status)
}

type section struct{ key string }

func (s section) DashboardSection(_ context.Context, userID int64) (summary.Section, error) {
	return summary.Section{Key: s.key, Items: []map[string]any{{"owner": userID}}, Total: 1}, nil
}

type counter struct{}

func (counter) PlatformCounts(context.Context) (map[string]int64, error) {
	return map[string]int64{"widgets": 3}, nil
}

func TestDashboardAndMetricsFromContributions(t *testing.T) {
	a := apptest.Start(t, apptest.WithFx(fx.Provide(
		summary.AsDashboardContributor(func() section { return section{key: "widgets"} }),
		summary.AsCounter(func() counter { return counter{} }),
	)))
	admin := a.AdminToken(t)
	u := a.Register(t)
	r := a.Get(fmt.Sprintf("/api/users/%d/dashboard", u.ID), admin)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var d struct {
		User       struct{ ID int64 }
		DnsRecords []any                       `json:"dnsRecords"`
		Databases  []any                       `json:"databases"`
		Sections   map[string][]map[string]any `json:"sections"`
		Totals     map[string]int              `json:"totals"`
	}
	r.Decode(t, &d)
	assert.Equal(t, u.ID, d.User.ID)
	require.Len(t, d.Sections["widgets"], 1, "a new module appears without admin changing")
	assert.EqualValues(t, u.ID, d.Sections["widgets"][0]["owner"])
	assert.Equal(t, 1, d.Totals["widgets"])
	assert.NotNil(t, d.Databases)
	assert.NotNil(t, d.DnsRecords)
	assert.Equal(t, http.StatusNotFound, a.Get("/api/users/99999999/dashboard", admin).Status)

	r = a.Get("/api/metrics/platform", "")
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var m map[string]any
	r.Decode(t, &m)
	other, _ := m["other"].(map[string]any)
	assert.EqualValues(t, 3.0, other["widgets"], "%v", m["other"])
	assert.GreaterOrEqual(t, m["users"].(float64), 2.0)
	for _, k := range []string{"users", "databases", "activeDatabases", "dnsRecords", "wfautoAccounts", "aiKeys", "engines"} {
		assert.Contains(t, m, k)
	}
}

// TestEveryAdminRouteGuarded is generated from the route table (the OpenAPI document, which huma
// builds from the registered operations): every admin operation answers 401 without a token and
// 403 to a User.
func TestEveryAdminRouteGuarded(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	var doc struct {
		Paths map[string]map[string]struct {
			Role string `json:"x-required-role"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(r.Raw, &doc))
	checked := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if op.Role != "Admin" {
				continue
			}
			concrete := strings.NewReplacer("{id}", "1", "{userId}", "1").Replace(path)
			req := apptest.Request{Method: strings.ToUpper(method), Path: concrete}
			if req.Method == "POST" || req.Method == "PUT" {
				req.Body = map[string]any{}
			}
			t.Run(method+" "+path, func(t *testing.T) {
				assert.Equal(t, http.StatusUnauthorized, a.Do(req).Status, "no token")
				req.Token = u.Token
				assert.Equal(t, http.StatusForbidden, a.Do(req).Status, "role User")
			})
			checked++
		}
	}
	assert.GreaterOrEqual(t, checked, 11)
}

// TestOwnAccountDeletedInFlightIs401: an admin whose own account is deleted while a request is in
// flight (it passed the guard on the cached principal) and who reads, changes or deletes that
// account gets the guard's 401 for a token whose subject is gone, like every other route, never
// 404 "User not found" about themself. Another admin naming the deleted user gets the 404.
func TestOwnAccountDeletedInFlightIs401(t *testing.T) {
	// The change feed reaches this replica a second late: the window in which a request passes the
	// guard with the deleted admin's cached principal.
	const lag = time.Second
	a := apptest.Start(t, apptest.WithFx(fx.Decorate(func(db *bun.DB) *coherent.Bus {
		return coherent.New(db, coherent.Options{Lag: lag, Window: 10 * time.Second})
	})))
	admin := a.AdminToken(t)
	email := "gone-admin-" + testutil.RandomSuffix() + "@corp.test"
	r := a.Post("/api/users", admin, map[string]any{"fullName": "Gone Admin", "email": email,
		"password": "long-enough-password-42", "role": "Admin"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var me struct{ ID int64 }
	r.Decode(t, &me)
	r = a.Post("/api/auth/login", "", map[string]any{"email": email, "password": "long-enough-password-42"})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var tok struct {
		AccessToken string `json:"accessToken"`
	}
	r.Decode(t, &tok)
	own := fmt.Sprintf("/api/users/%d", me.ID)
	require.Equal(t, http.StatusOK, a.Get(own, tok.AccessToken).Status) // its principal is cached

	// Deleted the way DELETE /api/users/{id} deletes it, by a request this replica did not serve.
	start := time.Now()
	_, err := a.DB.ExecContext(context.Background(),
		"UPDATE users SET deleted_at = now(), security_stamp = security_stamp + 1 WHERE id = ?", me.ID)
	require.NoError(t, err)
	for _, c := range []apptest.Request{
		{Method: http.MethodGet, Path: own},
		{Method: http.MethodGet, Path: own + "/dashboard"},
		{Method: http.MethodPut, Path: own, Body: map[string]any{"fullName": "Still Here"}},
		{Method: http.MethodDelete, Path: own},
	} {
		c.Token, c.SkipSync = tok.AccessToken, true
		r := a.Do(c)
		assert.Equal(t, http.StatusUnauthorized, r.Status, "%s %s: %s", c.Method, c.Path, r.Raw)
		assert.Equal(t, "Invalid or expired token", r.Env.Message, "%s %s", c.Method, c.Path)
	}
	require.Less(t, time.Since(start), lag, "the requests above went through the handlers, not the guard")

	r = a.Get(own, admin)
	assert.Equal(t, http.StatusNotFound, r.Status, string(r.Raw))
	assert.Equal(t, "User not found", r.Env.Message)
}
