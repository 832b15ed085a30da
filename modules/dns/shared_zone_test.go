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
	"provisioner/platform/testutil"
)

// deployment starts an app on a fresh control database of its own (its rows numbered from 1, as
// every deployment's are) against the zone of fake, with the same cell subdomain: staging and
// production, or a production restored from a backup, sharing one zone.
func deployment(t *testing.T, fake *cloudflaretest.Fake, label string) *apptest.App {
	t.Helper()
	a := apptest.Start(t, apptest.With(map[string]any{"ConnectionStrings:Control": testutil.FreshDatabase(t, label), "Dns:BaseUrl": fake.URL, "Dns:ZoneId": "zone123",
		"Dns:ApiToken": token, "Dns:ZoneName": "example.com", "Dns:CellSubdomain": "cell", "Dns:DefaultContent": "203.0.113.10",
		"Dns:TimeoutSeconds": 1, "RateLimit:Register": "1000-M"}))
	return a
}

// TestTwoDeploymentsSharingAZoneNeverTakeEachOthersRecord: the first record of each of two
// control databases has the same id and owner id. The second deployment's record for a name the
// first one holds is refused (the name is taken), never adopted; revoking a record of the second,
// left Pending for a name the first holds under the same id, deletes nothing of the first's. With comments made of the
// ids alone, the second adopted the first's record as its own.
func TestTwoDeploymentsSharingAZoneNeverTakeEachOthersRecord(t *testing.T) {
	fake := cloudflaretest.New("zone123", token, "example.com")
	t.Cleanup(fake.Close)
	staging, production := deployment(t, fake, "dns_shared_a"), deployment(t, fake, "dns_shared_b")
	alice, bob := staging.Register(t), production.Register(t)
	require.Equal(t, alice.ID, bob.ID, "both deployments number their users alike")
	l := label()
	r := staging.Post("/api/me/dns", alice.Token, map[string]any{"label": l})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var first rec
	r.Decode(t, &first)
	require.Len(t, at(fake, l), 1)

	r = production.Post("/api/me/dns", bob.Token, map[string]any{"label": l})
	assert.Equal(t, http.StatusConflict, r.Status, "the name is the other deployment's: %s", r.Raw)
	var n int
	require.NoError(t, production.DB.QueryRow("SELECT count(*) FROM dns_records").Scan(&n))
	assert.Zero(t, n, "nothing stored for the 409")

	// A record of bob's for another name of alice's, with the id of alice's record there, left
	// Pending by a crash before its create, then revoked: the lookup finds alice's record only.
	l2 := label()
	r = staging.Post("/api/me/dns", alice.Token, map[string]any{"label": l2})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var second rec
	r.Decode(t, &second)
	_, err := production.DB.Exec(`INSERT INTO dns_records (id, user_id, label, name, fqdn, content, record_ttl, proxied, status)
		VALUES (?, ?, ?, ?, ?, '203.0.113.10', 1, false, 'Pending')`, second.ID, bob.ID, l2, l2+".cell", l2+".cell.example.com")
	require.NoError(t, err)
	r = production.Do(apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/dns/%d", second.ID), Token: bob.Token})
	require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
	production.Settle(5 * time.Second)

	for _, want := range []rec{first, second} {
		held := at(fake, want.Label)
		require.Len(t, held, 1, "alice's record is still at the provider")
		assert.Equal(t, want.ProviderRecordID, held[0].ID)
	}
	var list []rec
	staging.Get("/api/me/dns", alice.Token).Decode(t, &list)
	require.Len(t, list, 2)
	assert.Equal(t, "Active", list[0].Status)
	assert.Equal(t, "Active", list[1].Status)
}
