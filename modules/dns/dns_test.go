package dns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
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

// failedWhileHeld creates a record of label l whose create reaches the provider but whose answer
// is lost (the lookups after it fail until the request times out), so with Finisher:MaxAttempts 1
// the row ends Failed while the provider holds our record.
func failedWhileHeld(t *testing.T, a *apptest.App, fake *cloudflaretest.Fake, token, l string) rec {
	t.Helper()
	// The provider stores the record but answers past the client's 1 s timeout: the answer is
	// lost, the timed-out create is not sent again, and the only attempt (Finisher:MaxAttempts 1)
	// ends Failed.
	fake.SetAfterCreate(func(string) { time.Sleep(1500 * time.Millisecond) })
	r := a.Post("/api/me/dns", token, map[string]any{"label": l})
	fake.SetAfterCreate(nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	require.Equal(t, "Failed", got.Status, "attempts ran out (Finisher:MaxAttempts 1)")
	return got
}

// TestRevokingAFailedRecordDeletesOursAtTheProvider: a record whose create reached the provider
// but whose attempts ran out (answers lost, lookups failing) ends Failed while the provider holds
// it. Revoking it deletes that provider record, so the label can be created again; a deleted
// user's Failed record is cleaned up the same way.
func TestRevokingAFailedRecordDeletesOursAtTheProvider(t *testing.T) {
	a, fake := setup(t, map[string]any{"Finisher:MaxAttempts": 1})
	u := a.Register(t)
	l := label()
	got := failedWhileHeld(t, a, fake, u.Token, l)
	require.Len(t, fake.Records(), 1, "the provider holds it")

	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"status":"Revoked"`)
	assert.Empty(t, fake.Records(), "deleted at the provider")

	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": l, "content": "198.51.100.9"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))

	// A provider failure while revoking a Failed record: Revoking, finished by the finisher.
	l2 := label()
	got = failedWhileHeld(t, a, fake, u.Token, l2)
	fake.Fail(cloudflaretest.Fault{Status: 503, Method: "GET"}, cloudflaretest.Fault{Status: 503, Method: "GET"}, cloudflaretest.Fault{Status: 503, Method: "GET"})
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"status":"Revoking"`)
	status := retryNow(t, a, got.ID)
	assert.Equal(t, "Revoked", status)
	for _, x := range fake.Records() {
		assert.NotEqual(t, l2+".cell.example.com", x.Name)
	}

	// A deleted user's Failed record is checked at the provider too.
	l3 := label()
	failedWhileHeld(t, a, fake, u.Token, l3)
	admin := a.AdminToken(t)
	require.Equal(t, http.StatusOK, a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin}).Status)
	a.Settle(5 * time.Second)
	assert.Empty(t, fake.Records(), "every provider record of the deleted user is gone")
}

// TestLeftoverOfADeadRowIsRemovedByTheNextCreate: a Failed record whose create reached the
// provider (its answer lost, then its attempts ran out) leaves our record at the provider. When
// another row of its label is created (the Failed one no longer holds the label), the leftover,
// carrying the marker of that non-live row, is deleted and the create proceeds instead of finding
// the name taken for ever; a deleted user's Failed record revoked at once because another user's
// Pending record holds its label is cleaned up the same way when that record is finished.
func TestLeftoverOfADeadRowIsRemovedByTheNextCreate(t *testing.T) {
	a, fake := setup(t, map[string]any{"Finisher:MaxAttempts": 1})
	u, v := a.Register(t), a.Register(t)
	only := func(l string) cloudflaretest.Record {
		t.Helper()
		var at []cloudflaretest.Record
		for _, x := range fake.Records() {
			if x.Name == l+".cell.example.com" {
				at = append(at, x)
			}
		}
		require.Len(t, at, 1, "one record of %s at the provider", l)
		return at[0]
	}

	l := label()
	leftover := failedWhileHeld(t, a, fake, u.Token, l)
	require.Contains(t, only(l).Comment, fmt.Sprintf("record:%d", leftover.ID))
	r := a.Post("/api/me/dns", v.Token, map[string]any{"label": l, "content": "198.51.100.30"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, got.ProviderRecordID, only(l).ID, "the leftover replaced by v's record")
	// Revoking the Failed record while v's holds the label revokes it at once and deletes nothing
	// of v's, not even once the finisher has swept it.
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", leftover.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	a.Settle(5 * time.Second)
	assert.Equal(t, got.ProviderRecordID, only(l).ID)

	// The deleted user's case: v's create of l2 is Pending (transient failure) when u, whose
	// Failed record of l2 left ours at the provider, is deleted; the finisher then creates v's.
	l2 := label()
	failedWhileHeld(t, a, fake, u.Token, l2)
	fake.Fail(cloudflaretest.Fault{Status: 500, Method: "GET"}, cloudflaretest.Fault{Status: 500, Method: "GET"}, cloudflaretest.Fault{Status: 500, Method: "GET"})
	r = a.Post("/api/me/dns", v.Token, map[string]any{"label": l2, "content": "198.51.100.31"})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var pending rec
	r.Decode(t, &pending)
	_, err := a.DB.Exec("UPDATE dns_records SET status = 'Pending', attempts = 0, next_attempt_at = now() + interval '1 hour' WHERE id = ?", pending.ID)
	require.NoError(t, err, "v's record stays Pending (MaxAttempts 1 gave it up)")
	admin := a.AdminToken(t)
	require.Equal(t, http.StatusOK, a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin}).Status)
	assert.Equal(t, "Active", retryNow(t, a, pending.ID))
	var pid string
	require.NoError(t, a.DB.QueryRow("SELECT provider_record_id FROM dns_records WHERE id = ?", pending.ID).Scan(&pid))
	assert.Equal(t, pid, only(l2).ID)
}

// at returns the provider's records named l in the cell.
func at(fake *cloudflaretest.Fake, l string) []cloudflaretest.Record {
	var out []cloudflaretest.Record
	for _, x := range fake.Records() {
		if x.Name == l+".cell.example.com" {
			out = append(out, x)
		}
	}
	return out
}

// TestDeletedUsersLeftoverIsDeletedByTheFinisher: a deleted user's Failed record whose create
// reached the provider, revoked at once because another user's record held its label, does not
// leave its record in the zone when nobody creates that label again (the other record is revoked
// before it was ever created): the finisher deletes it. A provider fault during that cleanup is
// retried with backoff, and another party's record at the same name is untouched.
func TestDeletedUsersLeftoverIsDeletedByTheFinisher(t *testing.T) {
	a, fake := setup(t, map[string]any{"Finisher:MaxAttempts": 1})
	admin := a.AdminToken(t)
	u, v := a.Register(t), a.Register(t)
	l := label()
	failed := failedWhileHeld(t, a, fake, u.Token, l)
	require.Len(t, at(fake, l), 1, "the provider holds u's record")
	theirs := fake.Put(l+".cell", "192.0.2.66") // another party's record at the same name
	var held int64
	require.NoError(t, a.DB.QueryRow(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status, next_attempt_at)
		VALUES (?, ?, ?, ?, '198.51.100.40', 1, 'Pending', now() + interval '1 hour') RETURNING id`, v.ID, l, l+".cell", l+".cell.example.com").Scan(&held))

	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE id = ?", failed.ID).Scan(&status))
	require.Equal(t, "Revoked", status, "revoked at once: v's record holds the label")
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", held), Token: v.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	require.Len(t, at(fake, l), 2, "v's revocation deleted nothing: neither record is v's")

	// The provider fails the cleanup's lookup: nothing is deleted, the cleanup is tried again.
	fake.Fail(cloudflaretest.Fault{Status: 500, Method: "GET"}, cloudflaretest.Fault{Status: 500, Method: "GET"}, cloudflaretest.Fault{Status: 500, Method: "GET"})
	a.Settle(5 * time.Second)
	require.Len(t, at(fake, l), 2, "the failed cleanup deleted nothing")
	_, err := a.DB.Exec("UPDATE dns_leftovers SET next_attempt_at = now() WHERE record_id = ? AND status = 'Sweeping'", failed.ID)
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	left := at(fake, l)
	require.Len(t, left, 1, "u's leftover is gone: %v", left)
	assert.Equal(t, theirs, left[0].ID, "the other party's record is untouched")
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'dns.leftover.deleted' AND target_id = ?", fmt.Sprint(failed.ID)).Scan(&n))
	assert.Equal(t, 1, n, "audited")
}

// TestFailedRecordsLeftoverIsDeletedByTheFinisher: a live user's record whose create reached the
// provider but whose attempts ran out is Failed; it does not stay in the zone. When its label is
// held by another record, so that its owner's DELETE is a 409, the finisher still deletes our
// record at the provider. A Failed record retried meanwhile (Active again, our record adopted)
// keeps its record.
func TestFailedRecordsLeftoverIsDeletedByTheFinisher(t *testing.T) {
	a, fake := setup(t, map[string]any{"Finisher:MaxAttempts": 1})
	admin := a.AdminToken(t)
	u, v := a.Register(t), a.Register(t)

	retried := label()
	got := failedWhileHeld(t, a, fake, u.Token, retried)
	r := a.Post(fmt.Sprintf("/api/dns/records/%d/retry", got.ID), admin, nil)
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &got)
	require.Equal(t, "Active", got.Status)

	l := label()
	failed := failedWhileHeld(t, a, fake, u.Token, l)
	_, err := a.DB.Exec(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status, next_attempt_at)
		VALUES (?, ?, ?, ?, '198.51.100.41', 1, 'Pending', now() + interval '1 hour')`, v.ID, l, l+".cell", l+".cell.example.com")
	require.NoError(t, err)
	require.Len(t, at(fake, l), 1, "the provider holds u's record")

	a.Settle(5 * time.Second)
	assert.Empty(t, at(fake, l), "the Failed record's leftover is deleted")
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE id = ?", failed.ID).Scan(&status))
	assert.Equal(t, "Failed", status)
	assert.Contains(t, fake.Records(), got.ProviderRecordID, "the retried record, Active, keeps its record")
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE id = ?", got.ID).Scan(&status))
	assert.Equal(t, "Active", status)
}

// TestFailedAfterALostAnswerLeavesNoRecord: a create whose answer was lost (the provider made the
// record) is retried; the retry's lookup is refused (4xx), so the record ends Failed. Our record
// at the provider is then deleted by the finisher.
func TestFailedAfterALostAnswerLeavesNoRecord(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	// The create's answer is lost (past the 1 s timeout; the create is not sent again): Pending.
	fake.SetAfterCreate(func(string) { time.Sleep(1500 * time.Millisecond) })
	l := label()
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
	fake.SetAfterCreate(nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	require.Equal(t, "Pending", got.Status)
	require.Len(t, at(fake, l), 1)

	fake.Fail(cloudflaretest.Fault{Status: 403, Method: "GET"})
	assert.Equal(t, "Failed", retryNow(t, a, got.ID))
	assert.Empty(t, at(fake, l), "the Failed record's leftover is deleted")
}

// TestRevokingAFailedRecordWhoseLabelIsLiveAgain: a Failed record does not hold its label; when
// another live record took it, revoking the Failed one revokes it at once (it was a 409, and the
// user could never remove the row while the other record lived), leaves the other record alone and
// has the finisher delete only what the Failed one's create left at the provider.
func TestRevokingAFailedRecordWhoseLabelIsLiveAgain(t *testing.T) {
	a, fake := setup(t, map[string]any{"Finisher:MaxAttempts": 1})
	u, v := a.Register(t), a.Register(t)
	l := label()
	failed := failedWhileHeld(t, a, fake, u.Token, l)
	require.Len(t, at(fake, l), 1, "its create reached the provider")
	_, err := a.DB.Exec(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status, next_attempt_at)
		VALUES (?, ?, ?, ?, '203.0.113.10', 1, 'Pending', now() + interval '1 hour')`, v.ID, l, l+".cell", l+".cell.example.com")
	require.NoError(t, err)
	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", failed.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Revoked", got.Status)
	r = a.Get("/api/me/dns", u.Token)
	require.Equal(t, http.StatusOK, r.Status)
	assert.NotContains(t, string(r.Raw), fmt.Sprintf(`"id":%d,`, failed.ID), "gone from the user's list")
	var events int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'dns.revoked' AND target_id = ?", fmt.Sprint(failed.ID)).Scan(&events))
	assert.Equal(t, 1, events)

	a.Settle(5 * time.Second)
	assert.Empty(t, at(fake, l), "the Failed record's leftover is deleted")
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE user_id = ? AND label = ?", v.ID, l).Scan(&status))
	assert.Equal(t, "Pending", status, "the other record is left alone")
}

// TestDeletedUsersFailedRecordLeavesTheLiveRecordOfItsLabelAlone: a deleted user's Failed record
// whose label another user's Active record holds now is Revoked at once (the label's live-row
// index forbids a second Revoking row, and that record's own create found the name free): the
// user deletion succeeds, and the other user's record stays at the provider and Active. When the
// name is held at the provider by a record not carrying the Failed row's marker (and no live row),
// the Failed row is revoked through the provider, which deletes nothing.
func TestDeletedUsersFailedRecordLeavesTheLiveRecordOfItsLabelAlone(t *testing.T) {
	a, fake := setup(t, nil)
	admin := a.AdminToken(t)
	u, v := a.Register(t), a.Register(t)

	// u's create of l is refused (Failed, nothing at the provider); v then takes l.
	l := label()
	fake.Fail(cloudflaretest.Fault{Status: 400, Method: "POST"})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var failed rec
	r.Decode(t, &failed)
	require.Equal(t, "Failed", failed.Status)
	r = a.Post("/api/me/dns", v.Token, map[string]any{"label": l, "content": "198.51.100.20"})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var live rec
	r.Decode(t, &live)
	require.Equal(t, "Active", live.Status)

	// u's create of l2 fails transiently; the finisher then finds the name held by a record not
	// made for it (Failed, "already exists").
	l2 := label()
	fake.Fail(cloudflaretest.Fault{Status: 500, Method: "GET"}, cloudflaretest.Fault{Status: 500, Method: "GET"}, cloudflaretest.Fault{Status: 500, Method: "GET"})
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": l2})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var failed2 rec
	r.Decode(t, &failed2)
	other := fake.Put(l2+".cell", "192.0.2.77")
	require.Equal(t, "Failed", retryNow(t, a, failed2.ID))
	atProvider := fake.Records()
	require.Len(t, atProvider, 2)

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	status := func(id int64) string {
		var s string
		require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE id = ?", id).Scan(&s))
		return s
	}
	assert.Equal(t, "Revoked", status(failed.ID), "revoked at once, in the deleting transaction")
	a.Settle(5 * time.Second)
	assert.Equal(t, "Revoked", status(failed.ID))
	assert.Equal(t, "Revoked", status(failed2.ID), "looked up at the provider, nothing of its own found")

	assert.Equal(t, atProvider, fake.Records(), "v's record and the other record of l2 are untouched at the provider")
	assert.Equal(t, l+".cell.example.com", fake.Records()[live.ProviderRecordID].Name)
	assert.Contains(t, fake.Records(), other)
	var mine []rec
	a.Get("/api/me/dns", v.Token).Decode(t, &mine)
	require.Len(t, mine, 1)
	assert.Equal(t, live.ID, mine[0].ID)
	assert.Equal(t, "Active", mine[0].Status)
	assert.Equal(t, live.ProviderRecordID, mine[0].ProviderRecordID)
	assert.Equal(t, http.StatusConflict, a.Post("/api/me/dns", v.Token, map[string]any{"label": l}).Status, "v still holds the label")
}

// syncBuffer is a log sink safe for the app's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTransportErrorsShowNoInternals: a provider that cannot be reached or does not answer in
// time gives a stored and returned errorMessage that names what happened ("DNS provider
// unreachable", "DNS provider timed out") and nothing of our setup (the URL, the zone id, the
// address); the details are in the server log, without the API token.
func TestTransportErrorsShowNoInternals(t *testing.T) {
	logs := &syncBuffer{}
	capture := apptest.WithFx(fx.Decorate(func(*slog.Logger) *slog.Logger {
		return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	internals := []string{"zone123", l.Addr().String(), "/zones/", "dns_records", token}

	a, _ := setup(t, map[string]any{"Dns:BaseUrl": closed, "Finisher:MaxAttempts": 1}, capture)
	u := a.Register(t)
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Failed", got.Status, "attempts ran out (Finisher:MaxAttempts 1)")
	assert.Equal(t, "DNS provider unreachable", got.ErrorMessage)
	var stored, last string
	require.NoError(t, a.DB.QueryRow("SELECT error_message, last_error FROM dns_records WHERE id = ?", got.ID).Scan(&stored, &last))
	for _, s := range internals {
		assert.NotContains(t, string(r.Raw), s)
		assert.NotContains(t, stored+" "+last, s)
		assert.NotContains(t, string(a.Get("/api/me/dns", u.Token).Raw), s)
	}
	assert.Contains(t, logs.String(), "zone123", "the details are in the server log")
	assert.Contains(t, logs.String(), "connection refused")

	b, fake := setup(t, nil, capture)
	v := b.Register(t)
	slow := cloudflaretest.Fault{Delay: 1500 * time.Millisecond, Status: 200, Method: "GET"}
	fake.Fail(slow, slow, slow)
	r = b.Post("/api/me/dns", v.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	assert.Equal(t, "DNS provider timed out", got.ErrorMessage)
	for _, s := range internals {
		assert.NotContains(t, string(r.Raw), s)
	}
	assert.NotContains(t, logs.String(), token, "never the API token in the log")
}

func TestTransientFailuresRetriedWithRetryAfter(t *testing.T) {
	// The call's retries and their waits fit in Dns:TimeoutSeconds, which bounds the call whole.
	a, fake := setup(t, map[string]any{"Dns:TimeoutSeconds": 3})
	u := a.Register(t)
	// Inside one attempt: a 503 then a 429 with Retry-After: 1 are retried, then it succeeds.
	fake.Fail(cloudflaretest.Fault{Status: 503, Method: "POST"}, cloudflaretest.Fault{Status: 429, RetryAfter: 1, Method: "POST"})
	start := time.Now()
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "Retry-After was honoured")
	assert.EqualValues(t, 1, fake.Creates())

	// Still failing after the call's retries: 502, record Pending with the error, finished later.
	fake.Fail(cloudflaretest.Fault{Status: 500, Method: "POST"}, cloudflaretest.Fault{Status: 500, Method: "POST"}, cloudflaretest.Fault{Status: 500, Method: "POST"})
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	assert.Contains(t, got.ErrorMessage, "500")
	status := retryNow(t, a, got.ID)
	assert.Equal(t, "Active", status)

	// A timeout (slow provider) is transient too.
	fake.Fail(cloudflaretest.Fault{Delay: 3500 * time.Millisecond, Status: 200, Method: "GET"})
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	assert.Equal(t, http.StatusBadGateway, r.Status)
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
}

// TestProviderRetryAfterHoldsTheFinisherBack: a 429 whose Retry-After is longer than one call
// may wait ends the attempt; the record stays Pending and the finisher does not call the provider
// again before the wait is over.
func TestProviderRetryAfterHoldsTheFinisherBack(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	fake.Fail(cloudflaretest.Fault{Status: 429, RetryAfter: 30, Method: "POST"})
	before := time.Now()
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Less(t, time.Since(before), 10*time.Second, "the request does not sit out the Retry-After")
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	assert.Contains(t, got.ErrorMessage, "429")

	var next time.Time
	require.NoError(t, a.DB.QueryRow("SELECT next_attempt_at FROM dns_records WHERE id = ?", got.ID).Scan(&next))
	assert.False(t, next.Before(before.Add(30*time.Second)), "next attempt in %s, sooner than the provider's Retry-After", next.Sub(before))
	calls := fake.Calls()
	time.Sleep(1500 * time.Millisecond) // past the first plain backoff (~1 s)
	a.Settle(3 * time.Second)
	assert.Equal(t, calls, fake.Calls(), "no call to the provider before the wait")
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE id = ?", got.ID).Scan(&status))
	assert.Equal(t, "Pending", status)

	// Once the wait is over, the finisher creates it.
	status = retryNow(t, a, got.ID)
	assert.Equal(t, "Active", status)
	assert.EqualValues(t, 1, fake.Creates())
}

func TestRevokeFailureStaysRevokingForTheFinisher(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusCreated, r.Status)
	var got rec
	r.Decode(t, &got)
	fake.Fail(cloudflaretest.Fault{Status: 502, Method: "DELETE"}, cloudflaretest.Fault{Status: 502, Method: "DELETE"}, cloudflaretest.Fault{Status: 502, Method: "DELETE"})
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	r.Decode(t, &got)
	assert.Equal(t, "Revoking", got.Status)
	assert.NotEmpty(t, got.ErrorMessage)
	assert.Contains(t, fake.Records(), got.ProviderRecordID)

	status := retryNow(t, a, got.ID)
	assert.Equal(t, "Revoked", status)
	assert.NotContains(t, fake.Records(), got.ProviderRecordID)
}

// TestCrashAfterTheCallAdoptsTheRecord: the provider created the record but the process died
// before recording the outcome; the finisher looks the name up and adopts it, never creating a
// second one.
func TestCrashAfterTheCallAdoptsTheRecord(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	l := label()
	// The "crash": the provider stores the record, but its answer never arrives (the call times
	// out and is not sent again): the record stays Pending. The finisher's attempt looks the name
	// up and adopts it.
	fake.SetAfterCreate(func(string) { time.Sleep(1500 * time.Millisecond) })
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
	fake.SetAfterCreate(nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	require.Equal(t, "Active", retryNow(t, a, got.ID))
	require.NoError(t, a.DB.QueryRow("SELECT provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&got.ProviderRecordID))
	assert.EqualValues(t, 1, fake.Creates(), "nothing created twice: %v", fake.Records())
	assert.Contains(t, fake.Records(), got.ProviderRecordID, "the existing record was adopted")
	var adopted bool
	require.NoError(t, a.DB.QueryRow("SELECT (details->>'adopted')::bool FROM audit_events WHERE action = 'dns.created' AND target_id = ?", fmt.Sprint(got.ID)).Scan(&adopted))
	assert.True(t, adopted)

	// The outcome lost after the call (row still Pending): the finisher looks up and adopts.
	_, err := a.DB.Exec("UPDATE dns_records SET status = 'Pending', provider_record_id = '', next_attempt_at = now() WHERE id = ?", got.ID)
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	var status, providerID string
	require.NoError(t, a.DB.QueryRow("SELECT status, provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&status, &providerID))
	assert.Equal(t, "Active", status)
	assert.Equal(t, got.ProviderRecordID, providerID)
	assert.EqualValues(t, 1, fake.Creates(), "nothing created twice")

	// A row left Pending by a crash before the call: the finisher creates it once.
	_, err = a.DB.Exec(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status)
		VALUES (?, ?, ?, ?, '203.0.113.77', 1, 'Pending')`, u.ID, "crash-"+l, "crash-"+l+".cell", "crash-"+l+".cell.example.com")
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	assert.EqualValues(t, 2, fake.Creates())
	a.Settle(time.Second)
	assert.EqualValues(t, 2, fake.Creates())
}

// TestLostCreateAnswerThenFailedLookupStaysPendingAndIsAdopted: our record reaches the provider
// between our lookup and our create (an earlier create whose answer was lost, landing late); the
// create gets 81058 (identical record), and the lookup meant to adopt it fails with 500s. The
// record stays Pending (not Failed while the provider holds it) and the finisher adopts the
// provider's record: one record at the provider, the row Active with its id.
func TestLostCreateAnswerThenFailedLookupStaysPendingAndIsAdopted(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	fake.SetBeforeCreate(func(name string) {
		var id int64
		require.NoError(t, a.DB.QueryRow("SELECT id FROM dns_records WHERE fqdn = ?", name).Scan(&id))
		fake.PutRecord(cloudflaretest.Record{Name: name, Content: "203.0.113.10", TTL: 1, Comment: markerOf(t, a, id)})
		// From now on, lookups fail (every try of the client's one call).
		fake.Fail(cloudflaretest.Fault{Status: 500, Method: "GET"}, cloudflaretest.Fault{Status: 500, Method: "GET"},
			cloudflaretest.Fault{Status: 500, Method: "GET"})
	})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	fake.SetBeforeCreate(nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status, "not Failed: the provider holds the record")
	assert.Contains(t, got.ErrorMessage, "81058")
	require.Len(t, fake.Records(), 1)

	_, err := a.DB.Exec("UPDATE dns_records SET next_attempt_at = now() WHERE id = ?", got.ID)
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	var status, providerID string
	require.NoError(t, a.DB.QueryRow("SELECT status, provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&status, &providerID))
	assert.Equal(t, "Active", status)
	records := fake.Records()
	require.Len(t, records, 1, "exactly one provider record")
	assert.Contains(t, records, providerID, "the row carries the provider's id")
	assert.EqualValues(t, 0, fake.Creates(), "adopted, not created again")
}

func TestConcurrentCreatesNeverDuplicate(t *testing.T) {
	a, fake := setup(t, map[string]any{"Dns:MaxRecordsPerUser": 100})
	users := make([]apptest.User, 10)
	for i := range users {
		users[i] = a.Register(t)
	}
	var wg sync.WaitGroup
	statuses := make(chan int, 60)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses <- a.Post("/api/me/dns", users[i%10].Token, map[string]any{"label": fmt.Sprintf("c%d-%s", i, testutil.RandomSuffix())}).Status
		}(i)
	}
	same := label()
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses <- a.Post("/api/me/dns", users[i].Token, map[string]any{"label": same}).Status
		}(i)
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	assert.Equal(t, 51, counts[http.StatusCreated], "50 distinct labels and one winner of the shared label")
	assert.Equal(t, 9, counts[http.StatusConflict])

	ids := make([]int64, len(users))
	for i, u := range users {
		ids[i] = u.ID
	}
	rows, err := a.DB.Query("SELECT provider_record_id FROM dns_records WHERE status = 'Active' AND user_id IN (?)", bun.In(ids))
	require.NoError(t, err)
	active := map[string]bool{}
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		active[id] = true
	}
	rows.Close()
	provider := fake.Records()
	assert.Equal(t, len(active), len(provider), "exactly one provider record per Active row")
	for id := range provider {
		assert.True(t, active[id], "provider record %s has its row", id)
	}
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
