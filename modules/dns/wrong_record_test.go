package dns_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
)

// TestACreatedRecordNamedOtherwiseIsRefused: a create answered success: true with a record of
// another name (an answer meant for another request: a mixed-up proxy or cache) names a record
// that is not ours, often another party's. Stored as ours, revoking ours would delete theirs. The
// answer is refused as suspicious: the record stays Pending (502) without that id, the finisher's
// lookup adopts the record made for it, and revoking it leaves the other party's record alone.
func TestACreatedRecordNamedOtherwiseIsRefused(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	victim := "victim-" + label()
	victimID := fake.Put(victim+".cell", "198.51.100.1") // another party's record in the zone
	l := label()
	fake.Fail(cloudflaretest.Fault{Method: "POST", Carried: true,
		Raw: `{"success":true,"errors":[],"messages":[],"result":{"id":"` + victimID + `","type":"A","name":"` + victim +
			`.cell.example.com","content":"198.51.100.1","ttl":1,"proxied":false}}`})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	assert.Contains(t, got.ErrorMessage, "suspicious")
	assert.Empty(t, got.ProviderRecordID, "the other record's id is not stored")

	require.Equal(t, "Active", retryNow(t, a, got.ID))
	var pid string
	require.NoError(t, a.DB.QueryRow("SELECT provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&pid))
	require.Len(t, at(fake, l), 1)
	assert.Equal(t, at(fake, l)[0].ID, pid, "its own record")

	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	assert.Contains(t, fake.Records(), victimID, "the other party's record is untouched")
	assert.Empty(t, at(fake, l), "ours is deleted")
}
