package dns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/dns"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
	"provisioner/platform/provision/provisiontest"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const token = "cf-test-token-never-logged"

type rec struct {
	ID               int64  `json:"id"`
	Label            string `json:"label"`
	Fqdn             string `json:"fqdn"`
	Content          string `json:"content"`
	RecordTTL        int    `json:"recordTtl"`
	Proxied          bool   `json:"proxied"`
	Status           string `json:"status"`
	ProviderRecordID string `json:"providerRecordId"`
	ErrorMessage     string `json:"errorMessage"`
}

func setup(t *testing.T, extra map[string]any, opts ...apptest.Option) (*apptest.App, *cloudflaretest.Fake) {
	t.Helper()
	fake := cloudflaretest.New("zone123", token, "example.com")
	t.Cleanup(fake.Close)
	kv := map[string]any{"Dns:BaseUrl": fake.URL, "Dns:ZoneId": "zone123", "Dns:ApiToken": token, "Dns:ZoneName": "example.com",
		"Dns:CellSubdomain": "cell", "Dns:DefaultContent": "203.0.113.10", "Dns:TimeoutSeconds": 1, "RateLimit:Register": "1000-M"}
	for k, v := range extra {
		kv[k] = v
	}
	a := apptest.Start(t, append([]apptest.Option{apptest.With(kv)}, opts...)...)
	// Tests share the package database: rows a test leaves in flight must not be driven by the
	// next test's finisher against its own fake provider.
	t.Cleanup(func() {
		_, _ = a.DB.Exec("UPDATE dns_records SET status = 'Failed' WHERE status = 'Pending'")
		_, _ = a.DB.Exec("UPDATE dns_records SET status = 'Revoked' WHERE status = 'Revoking'")
		_, _ = a.DB.Exec("UPDATE dns_leftovers SET status = 'Swept' WHERE status = 'Sweeping'")
	})
	return a, fake
}

func label() string { return "app-" + testutil.RandomSuffix() }

func TestCreateListRevoke(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	l := label()
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": strings.ToUpper(l), "recordTtl": 300})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Active", got.Status)
	assert.Equal(t, l, got.Label, "lower-cased")
	assert.Equal(t, l+".cell.example.com", got.Fqdn)
	assert.Equal(t, "203.0.113.10", got.Content, "Dns:DefaultContent")
	assert.NotEmpty(t, got.ProviderRecordID)
	stored := fake.Records()[got.ProviderRecordID]
	assert.Equal(t, l+".cell.example.com", stored.Name)
	assert.Equal(t, 300, stored.TTL)
	assert.Contains(t, stored.Comment, fmt.Sprintf("user:%d", u.ID), "the owner is named in the provider's dashboard")

	// Proxied records go with ttl 1.
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label(), "content": "198.51.100.7", "recordTtl": 600, "proxied": true})
	require.Equal(t, http.StatusCreated, r.Status)
	var prox rec
	r.Decode(t, &prox)
	assert.Equal(t, 1, fake.Records()[prox.ProviderRecordID].TTL)
	assert.True(t, fake.Records()[prox.ProviderRecordID].Proxied)
	assert.Equal(t, 1, prox.RecordTTL, "the TTL the provider holds (automatic), not the one asked")
	assert.Equal(t, 300, got.RecordTTL, "a DNS-only record keeps the TTL asked")

	list := a.Get("/api/me/dns", u.Token)
	var items []rec
	list.Decode(t, &items)
	require.Len(t, items, 2)
	assert.Equal(t, []int{300, 1}, []int{items[0].RecordTTL, items[1].RecordTTL})
	assert.NotContains(t, string(list.Raw), token)

	other := a.Register(t)
	assert.Equal(t, http.StatusNotFound, a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: other.Token}).Status)

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &got)
	assert.Equal(t, "Revoked", got.Status)
	assert.NotContains(t, fake.Records(), got.ProviderRecordID, "deleted at the provider")
	assert.Equal(t, http.StatusConflict, a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token}).Status)

	// The label is free again once revoked.
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
	assert.Equal(t, http.StatusCreated, r.Status)

	var actions []string
	rows, err := a.DB.Query("SELECT action FROM audit_events WHERE user_id = ? AND action LIKE 'dns.%' ORDER BY id", u.ID)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		actions = append(actions, s)
	}
	rows.Close()
	assert.Equal(t, []string{"dns.created", "dns.created", "dns.revoked", "dns.created"}, actions)
}

func TestValidation(t *testing.T) {
	a, fake := setup(t, map[string]any{"Dns:DefaultContent": ""})
	u := a.Register(t)
	cases := []struct {
		name   string
		body   map[string]any
		fields []string
	}{
		{"hyphen at end", map[string]any{"label": "bad-", "content": "203.0.113.1"}, []string{"label"}},
		{"dot", map[string]any{"label": "a.b", "content": "203.0.113.1"}, []string{"label"}},
		{"too long", map[string]any{"label": strings.Repeat("a", 64), "content": "203.0.113.1"}, []string{"label"}},
		{"underscore", map[string]any{"label": "a_b", "content": "203.0.113.1"}, []string{"label"}},
		{"no content and no default", map[string]any{"label": "ok"}, []string{"content"}},
		{"ipv6", map[string]any{"label": "ok", "content": "2001:db8::1"}, []string{"content"}},
		{"loopback", map[string]any{"label": "ok", "content": "127.0.0.1"}, []string{"content"}},
		{"unspecified", map[string]any{"label": "ok", "content": "0.0.0.0"}, []string{"content"}},
		{"link-local", map[string]any{"label": "ok", "content": "169.254.1.1"}, []string{"content"}},
		{"multicast", map[string]any{"label": "ok", "content": "224.0.0.1"}, []string{"content"}},
		{"broadcast", map[string]any{"label": "ok", "content": "255.255.255.255"}, []string{"content"}},
		{"this network", map[string]any{"label": "ok", "content": "0.1.2.3"}, []string{"content"}},
		{"reserved", map[string]any{"label": "ok", "content": "240.0.0.1"}, []string{"content"}},
		{"reserved, top", map[string]any{"label": "ok", "content": "255.255.255.254"}, []string{"content"}},
		{"not an ip", map[string]any{"label": "ok", "content": "example.com"}, []string{"content"}},
		{"leading zeros", map[string]any{"label": "ok", "content": "203.000.113.1"}, []string{"content"}},
		{"ttl 30", map[string]any{"label": "ok", "content": "203.0.113.1", "recordTtl": 30}, []string{"recordTtl"}},
		{"ttl too big", map[string]any{"label": "ok", "content": "203.0.113.1", "recordTtl": 86401}, []string{"recordTtl"}},
		{"all at once", map[string]any{"label": "-", "content": "10", "recordTtl": 2}, []string{"label", "content", "recordTtl"}},
		// One entry, under the field (there was a second on "body" naming int64's range).
		{"ttl beyond int64", map[string]any{"label": "ok", "content": "203.0.113.1", "recordTtl": 1e308}, []string{"recordTtl"}},
		{"ttl a fraction a float64 cannot hold", map[string]any{"label": "ok", "content": "203.0.113.1", "recordTtl": json.Number("300.0000000000000001")}, []string{"recordTtl"}},
		{"A-label that is not punycode", map[string]any{"label": "xn--a", "content": "203.0.113.1"}, []string{"label"}},
		{"A-label with bad punycode", map[string]any{"label": "xn--ab-cd", "content": "203.0.113.1"}, []string{"label"}},
		{"reserved hyphens", map[string]any{"label": "ab--cd", "content": "203.0.113.1"}, []string{"label"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := a.Post("/api/me/dns", u.Token, tc.body)
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.ElementsMatch(t, tc.fields, r.Fields(), string(r.Raw))
		})
	}
	assert.Zero(t, fake.Calls(), "bad input never reaches the provider")
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM dns_records WHERE user_id = ?", u.ID).Scan(&n))
	assert.Zero(t, n, "nothing half-written")

	// The content message names exactly what is refused.
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": "ok", "content": "127.0.0.1"})
	require.Equal(t, http.StatusBadRequest, r.Status)
	assert.NotContains(t, string(r.Raw), "public")
	for _, s := range []string{"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255"} {
		assert.Contains(t, string(r.Raw), s)
	}
	other := a.Register(t) // five records: the quota of one user
	for _, public := range []string{"1.0.0.1", "223.255.255.254", "172.32.0.1", "100.128.0.1", "198.20.0.1"} {
		r = a.Post("/api/me/dns", other.Token, map[string]any{"label": label(), "content": public})
		assert.Equal(t, http.StatusCreated, r.Status, "%s is accepted: %s", public, r.Raw)
	}
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": "xn--bcher-kva", "content": "198.51.100.1"})
	assert.NotEqual(t, http.StatusBadRequest, r.Status, "a valid A-label is accepted: %s", r.Raw)
}

func TestDuplicateLabelAndQuota(t *testing.T) {
	a, _ := setup(t, map[string]any{"Dns:MaxRecordsPerUser": 2})
	u, v := a.Register(t), a.Register(t)
	l := label()
	require.Equal(t, http.StatusCreated, a.Post("/api/me/dns", u.Token, map[string]any{"label": l}).Status)
	assert.Equal(t, http.StatusConflict, a.Post("/api/me/dns", v.Token, map[string]any{"label": l}).Status, "a live label in the cell")
	require.Equal(t, http.StatusCreated, a.Post("/api/me/dns", u.Token, map[string]any{"label": label()}).Status)
	assert.Equal(t, http.StatusConflict, a.Post("/api/me/dns", u.Token, map[string]any{"label": label()}).Status, "quota")
}

func TestProviderFailureIsStoredAndListed(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	// A 4xx answer from the provider is final, with its code and message stored.
	fake.Fail(cloudflaretest.Fault{Status: 400, Method: "POST"})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status)
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Failed", got.Status)
	assert.Contains(t, got.ErrorMessage, "[10000]")
	assert.False(t, r.Env.Success)

	var list []rec
	a.Get("/api/me/dns", u.Token).Decode(t, &list)
	require.Len(t, list, 1)
	assert.Equal(t, "Failed", list[0].Status)
	assert.NotEmpty(t, list[0].ErrorMessage)

	// Revoking it dismisses it: Revoked records are not listed to their user.
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"status":"Revoked"`)
	r = a.Get("/api/me/dns", u.Token)
	r.Decode(t, &list)
	assert.Empty(t, list, "a revoked record is not listed: %s", r.Raw)
	admin := a.AdminToken(t)
	r = a.Get(fmt.Sprintf("/api/dns/records?userId=%d&status=Revoked", u.ID), admin)
	assert.Contains(t, string(r.Raw), `"totalCount":1`, "administrators keep the trace")
}

// TestNameHeldAtTheProviderIs409: a name the provider holds for a record not made by us is a
// conflict like a label taken in our own table: 409, nothing stored, however often it is tried,
// and the other party's record is untouched. That holds when our lookup finds it and when it
// appears between our lookup and our create (81053). Created by the finisher (no client waits),
// the record ends Failed with the reason stored.
func TestNameHeldAtTheProviderIs409(t *testing.T) {
	a, fake := setup(t, map[string]any{"Dns:MaxRecordsPerUser": 2})
	u := a.Register(t)
	rows := func() int {
		var n int
		require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM dns_records WHERE user_id = ?", u.ID).Scan(&n))
		return n
	}
	l := label()
	theirs := fake.Put(l+".cell", "192.0.2.55")
	for i := 0; i < 3; i++ {
		r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
		require.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
		assert.Contains(t, r.Env.Message, l+".cell.example.com")
	}
	// Identical content, no marker of ours: still not ours.
	same := label()
	fake.Put(same+".cell", "203.0.113.10")
	assert.Equal(t, http.StatusConflict, a.Post("/api/me/dns", u.Token, map[string]any{"label": same}).Status)

	// Taken between our lookup and our create: the provider answers 81053.
	raced := label()
	fake.SetBeforeCreate(func(name string) {
		if name == raced+".cell.example.com" {
			fake.Put(raced+".cell", "192.0.2.56")
		}
	})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": raced})
	fake.SetBeforeCreate(nil)
	require.Equal(t, http.StatusConflict, r.Status, string(r.Raw))

	assert.Zero(t, rows(), "nothing stored")
	var list []rec
	a.Get("/api/me/dns", u.Token).Decode(t, &list)
	assert.Empty(t, list)
	assert.Contains(t, fake.Records(), theirs)
	assert.Len(t, fake.Records(), 3, "only the other party's records")
	assert.Zero(t, fake.Creates(), "we created nothing")
	// The quota is untouched: the user can still create two records.
	require.Equal(t, http.StatusCreated, a.Post("/api/me/dns", u.Token, map[string]any{"label": label()}).Status)

	// The finisher's create (the request's attempt failed transiently, the name was taken since):
	// Failed, with the reason.
	late := label()
	fake.Fail(cloudflaretest.Fault{Status: 500, Method: "GET"}, cloudflaretest.Fault{Status: 500, Method: "GET"}, cloudflaretest.Fault{Status: 500, Method: "GET"})
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": late})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	require.Equal(t, "Pending", got.Status)
	fake.Put(late+".cell", "192.0.2.57")
	assert.Equal(t, "Failed", retryNow(t, a, got.ID))
	var msg string
	require.NoError(t, a.DB.QueryRow("SELECT error_message FROM dns_records WHERE id = ?", got.ID).Scan(&msg))
	assert.Contains(t, msg, "already exists at the provider and was not created for this record")

	// An administrator's retry of it: 409 with the record, Failed again.
	admin := a.AdminToken(t)
	r = a.Post(fmt.Sprintf("/api/dns/records/%d/retry", got.ID), admin, nil)
	require.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"status":"Failed"`)
	assert.EqualValues(t, 1, fake.Creates(), "nothing created for the taken names")
}

func TestAdminRoutesAndUserDeletion(t *testing.T) {
	a, fake := setup(t, nil)
	admin := a.AdminToken(t)
	u := a.Register(t)
	r := a.Post("/api/dns/records", admin, map[string]any{"userId": u.ID, "label": label(), "content": "198.51.100.20"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)

	fake.Fail(cloudflaretest.Fault{Status: 400, Method: "POST"})
	r = a.Post("/api/dns/records", admin, map[string]any{"userId": u.ID, "label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status)
	var failed rec
	r.Decode(t, &failed)
	r = a.Post(fmt.Sprintf("/api/dns/records/%d/retry", failed.ID), admin, nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"status":"Active"`)
	r = a.Post(fmt.Sprintf("/api/dns/records/%d/retry", failed.ID), admin, nil)
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "Nothing to retry: the record is Active", r.Env.Message, "not \"A Active record\"")

	r = a.Get(fmt.Sprintf("/api/dns/records?userId=%d&status=Active", u.ID), admin)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Contains(t, string(r.Raw), `"totalCount":2`)
	assert.Equal(t, http.StatusOK, a.Get(fmt.Sprintf("/api/dns/records/%d", got.ID), admin).Status)
	assert.Equal(t, http.StatusForbidden, a.Get("/api/dns/records", u.Token).Status)

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status)
	a.Settle(5 * time.Second)
	assert.Empty(t, fake.Records(), "a deleted user's records are revoked at the provider")

	// Each revoke is audited as the owner's own would be, by the admin who deleted the user.
	var revoked []string
	require.NoError(t, a.DB.NewSelect().Table("audit_events").Column("target_id").Where("action = 'dns.revoked'").
		Where("user_id = ?", u.ID).Where("actor_user_id = (SELECT id FROM users WHERE email = ? AND deleted_at IS NULL)", apptest.AdminEmail).
		Where("details->>'reason' = 'user.deleted'").Where("details->>'fqdn' <> ''").Scan(context.Background(), &revoked))
	assert.ElementsMatch(t, []string{fmt.Sprint(got.ID), fmt.Sprint(failed.ID)}, revoked)
}

func TestOutboundBudgetQueuesInsteadOfBursting(t *testing.T) {
	a, fake := setup(t, map[string]any{"Dns:OutboundRate": "4-S", "Dns:MaxRecordsPerUser": 50})
	u := a.Register(t)
	start := time.Now()
	for i := 0; i < 4; i++ { // 8 provider calls: lookup + create each
		require.Equal(t, http.StatusCreated, a.Post("/api/me/dns", u.Token, map[string]any{"label": label()}).Status)
	}
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "the calls past the budget waited for the next window")
	assert.EqualValues(t, 8, fake.Calls())
}

func TestValidators(t *testing.T) {
	for _, ok := range []string{"a", "a-b", "0", strings.Repeat("x", 63), "a--b", "xn--bcher-kva", "XN--MNCHEN-3YA", "xn--nxasmq6b"} {
		_, valid := dns.NormalizeLabel(ok)
		assert.True(t, valid, ok)
	}
	for _, bad := range []string{"", "-a", "a-", "a.b", "ä", strings.Repeat("x", 64), "\u212Aafka",
		// RFC 5891: "--" in the 3rd and 4th characters only in a valid A-label.
		"xn--a", "xn--0", "xn--ab-cd", "xn--zz", "ab--cd", "xy--bcher-kva", "xn--abc"} {
		_, valid := dns.NormalizeLabel(bad)
		assert.False(t, valid, bad)
	}
	assert.True(t, dns.ValidContent("8.8.8.8", false))
	assert.False(t, dns.ValidContent("::ffff:8.8.8.8", true))
	// Private and shared ranges only when allowed; 0.0.0.0/8 and 240.0.0.0/4 are never routable.
	for _, ok := range []string{"10.0.0.1", "100.64.0.1", "192.0.2.1", "172.16.0.1", "192.168.0.1", "198.19.255.255", "1.0.0.0", "223.255.255.255"} {
		assert.True(t, dns.ValidContent(ok, true), ok)
	}
	for _, private := range []string{"10.0.0.1", "100.64.0.1", "100.127.255.255", "172.16.0.1", "172.31.255.255", "192.168.0.1", "198.18.0.1", "198.19.255.255"} {
		assert.False(t, dns.ValidContent(private, false), private)
	}
	for _, public := range []string{"192.0.2.1", "172.32.0.1", "100.128.0.1", "198.20.0.1", "11.0.0.1"} {
		assert.True(t, dns.ValidContent(public, false), public)
	}
	for _, bad := range []string{"0.0.0.0", "0.1.2.3", "0.255.255.255", "240.0.0.1", "254.1.1.1", "255.255.255.255"} {
		assert.False(t, dns.ValidContent(bad, true), bad)
	}
	_ = context.Background()
}

// TestProvisionerSuite runs the suite every provisioner passes.
func TestProvisionerSuite(t *testing.T) {
	var prov *dns.Provisioner
	fake := cloudflaretest.New("zone123", token, "example.com")
	t.Cleanup(fake.Close)
	a := apptest.Start(t, apptest.With(map[string]any{"Dns:BaseUrl": fake.URL, "Dns:ZoneId": "zone123", "Dns:ApiToken": token,
		"Dns:ZoneName": "example.com"}), apptest.WithFx(fx.Populate(&prov)))
	u := a.Register(t)
	fqdn := func(t *testing.T, id int64) string {
		var f string
		require.NoError(t, a.DB.QueryRow("SELECT fqdn FROM dns_records WHERE id = ?", id).Scan(&f))
		return f
	}
	provisiontest.Run(t, provisiontest.Harness{
		DB: a.DB, Provisioner: prov, Created: "Active", Deleted: "Revoked",
		NewRow: func(t *testing.T) int64 {
			l := label()
			var id int64
			require.NoError(t, a.DB.QueryRow(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status)
				VALUES (?, ?, ?, ?, '203.0.113.10', 1, 'Pending') RETURNING id`, u.ID, l, l, l+".example.com").Scan(&id))
			return id
		},
		MarkDeleting: func(t *testing.T, id int64) {
			_, err := a.DB.Exec("UPDATE dns_records SET status = 'Revoking' WHERE id = ?", id)
			require.NoError(t, err)
		},
		External: func(t *testing.T, id int64) int {
			n, name := 0, fqdn(t, id)
			for _, r := range fake.Records() {
				if r.Name == name {
					n++
				}
			}
			return n
		},
		Status: func(t *testing.T, id int64) string {
			var s string
			require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE id = ?", id).Scan(&s))
			return s
		},
	})
}

func TestSpentBudgetQueuesTheRecordForTheFinisher(t *testing.T) {
	a, fake := setup(t, map[string]any{"Dns:OutboundRate": "2-M"})
	u := a.Register(t)
	require.Equal(t, http.StatusCreated, a.Post("/api/me/dns", u.Token, map[string]any{"label": label()}).Status) // 2 calls
	start := time.Now()
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	assert.Less(t, time.Since(start), 10*time.Second, "the request does not wait for the next window")
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status, "queued, not failed")
	assert.Contains(t, got.ErrorMessage, "budget")
	assert.EqualValues(t, 2, fake.Calls(), "nothing past the budget reached the provider")
}

// retryNow makes record id due, lets the finisher run, and returns the record's status.
func retryNow(t *testing.T, a *apptest.App, id int64) string {
	t.Helper()
	_, err := a.DB.Exec("UPDATE dns_records SET next_attempt_at = now() WHERE id = ?", id)
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE id = ?", id).Scan(&status))
	return status
}
