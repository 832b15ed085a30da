package dns_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
)

// TestSlowProviderCostsARequestOneTimeout: Dns:TimeoutSeconds bounds each provider call whole. A
// provider that does not answer in time costs the request one timeout (the call that timed out is
// not tried again within it), not three; the record stays Pending (Revoking) and the finisher
// completes it, creating it once, after the provider recovers.
func TestSlowProviderCostsARequestOneTimeout(t *testing.T) {
	a, fake := setup(t, nil) // Dns:TimeoutSeconds 1
	u := a.Register(t)
	const bound = 1800 * time.Millisecond // one timeout and a margin; the retries took 3.6 s

	// A slow lookup.
	fake.SetSlow(http.MethodGet, 5*time.Second)
	start := time.Now()
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	took := time.Since(start)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Less(t, took, bound, "a timed-out lookup is not tried again inside the request")
	var looked rec
	r.Decode(t, &looked)
	assert.Equal(t, "Pending", looked.Status)
	assert.Equal(t, "DNS provider timed out", looked.ErrorMessage)
	fake.SetSlow("", 0)

	// A slow create (the lookup answers).
	fake.SetSlow(http.MethodPost, 5*time.Second)
	start = time.Now()
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	took = time.Since(start)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Less(t, took, bound, "a timed-out create is not sent again inside the request")
	var created rec
	r.Decode(t, &created)
	assert.Equal(t, "Pending", created.Status)
	assert.EqualValues(t, 0, fake.Creates())

	// The provider recovers: the finisher creates each record, once.
	fake.SetSlow("", 0)
	assert.Equal(t, "Active", retryNow(t, a, looked.ID))
	assert.Equal(t, "Active", retryNow(t, a, created.ID))
	assert.EqualValues(t, 2, fake.Creates())
	assert.Len(t, fake.Records(), 2)

	// A slow delete: the revocation answers within one timeout too, and ends Revoked later.
	fake.SetSlow(http.MethodDelete, 5*time.Second)
	start = time.Now()
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", created.ID), Token: u.Token})
	took = time.Since(start)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Less(t, took, bound, "a timed-out delete is not sent again inside the request")
	var revoking rec
	r.Decode(t, &revoking)
	assert.Equal(t, "Revoking", revoking.Status)
	fake.SetSlow("", 0)
	assert.Equal(t, "Revoked", retryNow(t, a, created.ID))
	assert.Len(t, fake.Records(), 1)
}
