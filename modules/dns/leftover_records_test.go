package dns_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
)

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
	var owner, actor int64
	require.NoError(t, a.DB.QueryRow("SELECT user_id, actor_user_id FROM audit_events WHERE action = 'dns.leftover.deleted' AND target_id = ?",
		fmt.Sprint(leftover.ID)).Scan(&owner, &actor))
	assert.Equal(t, u.ID, owner, "the event is about the leftover's owner")
	assert.Equal(t, v.ID, actor, "made by v's create")
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
