package dns_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/dns"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
	"provisioner/platform/testutil"
)

// TestACreatedRecordUnfitToStoreIsAMalformedAnswer: the provider carries a create out and answers
// success: true with a record id PostgreSQL cannot store (a NUL), one holding a newline or too
// long, or a TTL beyond an int. The answer is malformed, as one without an id is: nothing of it
// is stored, the record stays Pending (502) with "malformed result from the provider" (never our
// database's words, SQLSTATE and all), and the finisher's lookup adopts the record the provider made.
func TestACreatedRecordUnfitToStoreIsAMalformedAnswer(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	for name, result := range map[string]string{
		"nul id":        `{"id":"cf\u0000x","ttl":1}`,
		"newline id":    `{"id":"cf\nlevel=ERROR","ttl":1}`,
		"long id":       `{"id":"` + strings.Repeat("a", 500) + `","ttl":1}`,
		"ttl too large": `{"id":"cf-ttl","ttl":3000000000}`,
		"ttl negative":  `{"id":"cf-ttl","ttl":-5}`,
	} {
		t.Run(name, func(t *testing.T) {
			l := label()
			fake.Fail(cloudflaretest.Fault{Method: "POST", Carried: true,
				Raw: `{"success":true,"errors":[],"messages":[],"result":` + result + `}`})
			r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
			require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
			var got rec
			r.Decode(t, &got)
			assert.Equal(t, "Pending", got.Status)
			assert.Contains(t, got.ErrorMessage, "malformed result from the provider")
			assert.NotContains(t, got.ErrorMessage, "SQLSTATE")
			assert.NotContains(t, got.ErrorMessage, " active:", "not our own wording about the row")
			assert.Empty(t, got.ProviderRecordID)
			require.Len(t, at(fake, l), 1, "the provider made it")

			require.Equal(t, "Active", retryNow(t, a, got.ID))
			var pid string
			require.NoError(t, a.DB.QueryRow("SELECT provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&pid))
			assert.Equal(t, at(fake, l)[0].ID, pid, "adopted with the id the lookup gives")
		})
	}
}

// TestAnErrorOfOursIsNotShown: an attempt that fails on our side (here the database refuses to
// record the outcome) is retried like any other, but what is stored and shown as errorMessage is a
// generic text: the database's words (the statement, SQLSTATE) are only logged.
func TestAnErrorOfOursIsNotShown(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	l := label()
	drop := testutil.RefuseUpdates(t, a.DB, "dns_records", fmt.Sprintf("NEW.status = 'Active' AND NEW.label = '%s'", l))

	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	assert.Equal(t, dns.MsgInternal, got.ErrorMessage)
	assert.NotContains(t, string(r.Raw), "secret_table")
	assert.NotContains(t, string(r.Raw), "SQLSTATE")
	var lastErr string
	require.NoError(t, a.DB.QueryRow("SELECT last_error FROM dns_records WHERE id = ?", got.ID).Scan(&lastErr))
	assert.Equal(t, dns.MsgInternal, lastErr)

	drop()
	require.Equal(t, "Active", retryNow(t, a, got.ID))
	require.Len(t, at(fake, l), 1, "adopted, never created twice")
}

// TestARecordIdHeldByAnotherRecordIsRefused: the provider carries a create out but answers it with
// the id of another user's live record. The answer is refused as suspicious: the record stays
// Pending (502) without that id, and the finisher's lookup adopts the record made for it, with its
// own id. Revoking it deletes only that one: the other user's record stays at the provider.
func TestARecordIdHeldByAnotherRecordIsRefused(t *testing.T) {
	a, fake := setup(t, nil)
	alice, bob := a.Register(t), a.Register(t)
	first := createActive(t, a, alice.Token)

	l := label()
	fake.Fail(cloudflaretest.Fault{Method: "POST", Carried: true,
		Raw: `{"success":true,"errors":[],"messages":[],"result":{"id":"` + first.ProviderRecordID + `","ttl":1}}`})
	r := a.Post("/api/me/dns", bob.Token, map[string]any{"label": l})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	assert.Contains(t, got.ErrorMessage, "belongs to another record")
	assert.Empty(t, got.ProviderRecordID)

	require.Equal(t, "Active", retryNow(t, a, got.ID))
	var pid string
	require.NoError(t, a.DB.QueryRow("SELECT provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&pid))
	require.Len(t, at(fake, l), 1)
	assert.Equal(t, at(fake, l)[0].ID, pid, "its own record")
	assert.NotEqual(t, first.ProviderRecordID, pid)

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: bob.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, fake.Records(), first.ProviderRecordID, "alice's record is untouched")

	// The index refuses a second live holder whatever the code does.
	_, err := a.DB.Exec("UPDATE dns_records SET provider_record_id = ? WHERE id = ?", first.ProviderRecordID, got.ID)
	require.NoError(t, err, "a Revoked row may keep any id")
	_, err = a.DB.Exec("INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status, provider_record_id) "+
		"VALUES (?, 'dup-x', 'dup-x', 'dup-x', '203.0.113.10', 1, 'Failed', ?)", bob.ID, first.ProviderRecordID)
	require.Error(t, err)
}
