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

// TestAdminRetryOfAFailedRecordKeepsTheQuota: a Failed record does not count towards
// Dns:MaxRecordsPerUser, so its user may fill the quota meanwhile; an administrator's retry of it
// then answers 409 (quota), the record stays Failed and nothing is created at the provider, as an
// administrator's create for that user would.
func TestAdminRetryOfAFailedRecordKeepsTheQuota(t *testing.T) {
	a, fake := setup(t, map[string]any{"Dns:MaxRecordsPerUser": 2})
	u := a.Register(t)
	admin := a.AdminToken(t)
	fake.Fail(cloudflaretest.Fault{Status: 400, Method: "POST"})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var failed rec
	r.Decode(t, &failed)
	require.Equal(t, "Failed", failed.Status)
	for range 2 {
		require.Equal(t, http.StatusCreated, a.Post("/api/me/dns", u.Token, map[string]any{"label": label()}).Status)
	}
	creates := fake.Creates()

	r = a.Post(fmt.Sprintf("/api/dns/records/%d/retry", failed.ID), admin, nil)
	assert.Equal(t, http.StatusConflict, r.Status, string(r.Raw))
	assert.Contains(t, r.Env.Message, "Quota")
	assert.Equal(t, creates, fake.Creates(), "nothing created at the provider")
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE id = ?", failed.ID).Scan(&status))
	assert.Equal(t, "Failed", status)
	var live int
	require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM dns_records WHERE user_id = ? AND status IN ('Pending','Active','Revoking')", u.ID).Scan(&live))
	assert.Equal(t, 2, live, "the quota holds")

	// Once the user has room again, the retry goes through.
	var list []rec
	a.Get("/api/me/dns", u.Token).Decode(t, &list)
	for _, x := range list {
		if x.Status == "Active" {
			require.Equal(t, http.StatusOK, a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", x.ID), Token: u.Token}).Status)
			break
		}
	}
	r = a.Post(fmt.Sprintf("/api/dns/records/%d/retry", failed.ID), admin, nil)
	assert.Equal(t, http.StatusOK, r.Status, string(r.Raw))
}
