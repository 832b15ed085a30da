package dns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/dns"
	"provisioner/modules/dns/cloudflare"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
)

// The provider's lookups (a create's, one after a create answered "exists", a revocation's of a
// record whose id was never recorded, a leftover's, a sweep's) may list a record carrying one of
// our rows' marker, name and content but whose id another live row holds: a broken or confused
// provider. These tests inject such listings and check that the other user's record is never
// deleted at the provider for the row at hand, nor its id stored for it.

// listing is the provider's answer to a lookup listing exactly recs.
func listing(t *testing.T, recs ...cloudflare.Record) string {
	t.Helper()
	raw, err := json.Marshal(map[string]any{"success": true, "errors": []any{}, "messages": []any{}, "result": recs,
		"result_info": map[string]int{"page": 1, "per_page": 100, "count": len(recs), "total_count": len(recs), "total_pages": 1}})
	require.NoError(t, err)
	return string(raw)
}

// markerOf is the comment the provider record of row id carries (dns.Marker).
func markerOf(t *testing.T, a *apptest.App, id int64) string {
	t.Helper()
	r := new(dns.Record)
	require.NoError(t, a.DB.NewSelect().Model(r).Where("id = ?", id).Scan(context.Background()))
	return dns.Marker(r)
}

// impostor is a record named and filled like row rowID of a, of label l, carrying its marker, but
// with the provider id another row holds.
func impostor(t *testing.T, a *apptest.App, l string, rowID int64, heldID string) cloudflare.Record {
	return cloudflare.Record{ID: heldID, Type: "A", Name: l + ".cell.example.com", Content: "203.0.113.10", TTL: 1,
		Comment: markerOf(t, a, rowID)}
}

// pendingWithoutID posts label l for token with the create's answer lost (a 200 without a record
// id, nothing made at the provider): the record is Pending and has no provider id.
func pendingWithoutID(t *testing.T, a *apptest.App, fake *cloudflaretest.Fake, token, l string) rec {
	t.Helper()
	fake.Fail(cloudflaretest.Fault{Method: "POST", Raw: `{"success":true,"errors":[],"messages":[],"result":{"ttl":1}}`})
	r := a.Post("/api/me/dns", token, map[string]any{"label": l})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	require.Equal(t, "Pending", got.Status)
	require.Empty(t, got.ProviderRecordID)
	require.Empty(t, at(fake, l), "nothing made at the provider")
	return got
}

// failedRow stores a Failed record of label l for userID, as one whose create's outcome was lost
// and whose attempts ran out.
func failedRow(t *testing.T, a *apptest.App, userID int64, l string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, a.DB.QueryRow(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status, attempts)
		VALUES (?, ?, ?, ?, '203.0.113.10', 1, 'Failed', 1) RETURNING id`, userID, l, l+".cell", l+".cell.example.com").Scan(&id))
	return id
}

// untouched checks that first (another user's Active record) is still at the provider, and still
// Active with its id on our side.
func untouched(t *testing.T, a *apptest.App, fake *cloudflaretest.Fake, first rec) {
	t.Helper()
	held, ok := fake.Records()[first.ProviderRecordID]
	if assert.True(t, ok, "the other user's record is still at the provider") {
		assert.Equal(t, first.Fqdn, held.Name)
	}
	var status, pid string
	require.NoError(t, a.DB.QueryRow("SELECT status, provider_record_id FROM dns_records WHERE id = ?", first.ID).Scan(&status, &pid))
	assert.Equal(t, "Active", status)
	assert.Equal(t, first.ProviderRecordID, pid)
}

// TestALookupNamingAnotherRecordsIdIsNeverAdopted: a create's lookup that lists the row's own
// record (its marker, name and content) with the id of another user's live record is a suspicious
// answer, whether it is the lookup before the create or the one after a create answered "an
// identical record already exists": the record stays Pending with the suspicious-result message
// and no provider id. Once the provider answers sensibly the record is created with its own id;
// the other user's record is never touched, even when this one is revoked.
func TestALookupNamingAnotherRecordsIdIsNeverAdopted(t *testing.T) {
	a, fake := setup(t, nil)
	alice, bob := a.Register(t), a.Register(t)
	first := createActive(t, a, alice.Token)
	l := label()
	got := pendingWithoutID(t, a, fake, bob.Token, l)
	twin := impostor(t, a, l, got.ID, first.ProviderRecordID)
	suspicious := func(when string) { // as bob sees it
		t.Helper()
		var list []rec
		a.Get("/api/me/dns", bob.Token).Decode(t, &list)
		require.Len(t, list, 1)
		assert.Equal(t, "Pending", list[0].Status, when)
		assert.Contains(t, list[0].ErrorMessage, "a record id that belongs to another record", when)
		assert.Empty(t, list[0].ProviderRecordID, when)
	}

	// The lookup before the create.
	fake.Fail(cloudflaretest.Fault{Method: "GET", Raw: listing(t, twin)})
	assert.Equal(t, "Pending", retryNow(t, a, got.ID))
	suspicious("the lookup before the create")
	untouched(t, a, fake, first)

	// The lookup after a create answered "an identical record already exists".
	fake.Fail(cloudflaretest.Fault{Method: "GET", Raw: listing(t)},
		cloudflaretest.Fault{Method: "POST", Status: http.StatusBadRequest,
			Raw: `{"success":false,"errors":[{"code":81058,"message":"An identical record already exists."}],"messages":[],"result":null}`},
		cloudflaretest.Fault{Method: "GET", Raw: listing(t, twin)})
	assert.Equal(t, "Pending", retryNow(t, a, got.ID))
	suspicious("the lookup after 81058")
	untouched(t, a, fake, first)

	// A sensible provider: created with its own id.
	require.Equal(t, "Active", retryNow(t, a, got.ID))
	own := at(fake, l)
	require.Len(t, own, 1)
	var pid string
	require.NoError(t, a.DB.QueryRow("SELECT provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&pid))
	assert.Equal(t, own[0].ID, pid)
	assert.NotEqual(t, first.ProviderRecordID, pid)

	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: bob.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Empty(t, at(fake, l), "bob's own record deleted")
	untouched(t, a, fake, first)
}

// TestALeftoverNamingAnotherRecordsIdIsNotDeleted: a create whose lookup lists, at its name, a
// record carrying a dead (Failed) row's marker and content is about to delete it as that row's
// leftover; when its id is one another user's live record holds, it is not deleted: it holds the
// name like any record not ours (409, nothing stored), and the other user's record stays.
func TestALeftoverNamingAnotherRecordsIdIsNotDeleted(t *testing.T) {
	a, fake := setup(t, nil)
	alice, bob, carol := a.Register(t), a.Register(t), a.Register(t)
	first := createActive(t, a, alice.Token)
	l := label()
	dead := failedRow(t, a, carol.ID, l)

	fake.Fail(cloudflaretest.Fault{Method: "GET", Raw: listing(t, impostor(t, a, l, dead, first.ProviderRecordID))})
	r := a.Post("/api/me/dns", bob.Token, map[string]any{"label": l})
	assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	untouched(t, a, fake, first)
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM dns_records WHERE user_id = ? AND label = ?", bob.ID, l).Scan(&n))
	assert.Zero(t, n, "nothing stored for the 409")
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'dns.leftover.deleted' AND target_id = ?",
		fmt.Sprint(dead)).Scan(&n))
	assert.Zero(t, n, "no leftover deleted")
}

// TestRevokingWithoutAnIdNeverDeletesAnotherRecordsId: revoking a record whose create's outcome
// was never recorded looks its name up and deletes the record carrying its marker; a listed one
// whose id another user's live record holds is not deleted: the revoked record ends Revoked and
// the other user's record stays at the provider.
func TestRevokingWithoutAnIdNeverDeletesAnotherRecordsId(t *testing.T) {
	a, fake := setup(t, nil)
	alice, bob := a.Register(t), a.Register(t)
	first := createActive(t, a, alice.Token)
	l := label()
	got := pendingWithoutID(t, a, fake, bob.Token, l)

	fake.Fail(cloudflaretest.Fault{Method: "GET", Raw: listing(t, impostor(t, a, l, got.ID, first.ProviderRecordID))})
	r := a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: bob.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	r.Decode(t, &got)
	assert.Equal(t, "Revoked", got.Status)
	assert.Empty(t, got.ErrorMessage)
	untouched(t, a, fake, first)
}

// TestASweepNeverDeletesAnotherRecordsId: the background sweep of a Failed record's leftover
// deletes the record carrying its marker; a listed one whose id another user's live record holds
// is not deleted: the sweep ends Swept, nothing deleted, and the other user's record stays.
func TestASweepNeverDeletesAnotherRecordsId(t *testing.T) {
	a, fake := setup(t, nil)
	alice, bob := a.Register(t), a.Register(t)
	first := createActive(t, a, alice.Token)
	l := label()
	dead := failedRow(t, a, bob.ID, l)

	fake.Fail(cloudflaretest.Fault{Method: "GET", Raw: listing(t, impostor(t, a, l, dead, first.ProviderRecordID))})
	_, err := a.DB.Exec("INSERT INTO dns_leftovers (record_id) VALUES (?)", dead)
	require.NoError(t, err)
	calls := fake.Calls()
	a.Settle(5 * time.Second)
	assert.Equal(t, calls+1, fake.Calls(), "the sweep looked the name up, and deleted nothing")
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_leftovers WHERE record_id = ?", dead).Scan(&status))
	assert.Equal(t, "Swept", status)
	untouched(t, a, fake, first)
	var n int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM audit_events WHERE action = 'dns.leftover.deleted' AND target_id = ?",
		fmt.Sprint(dead)).Scan(&n))
	assert.Zero(t, n, "no leftover deleted")
}
