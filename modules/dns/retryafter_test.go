package dns_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/modules/dns/cloudflare/cloudflaretest"
	"provisioner/platform/testutil/apptest"
)

// TestProviderFailed502CarriesRetryAfter: a 502 whose record stays Pending or Revoking says in
// Retry-After when the background finisher tries the provider again, never sooner than the
// provider's own Retry-After (a 429 or a 503 asking for longer than one call may wait); a 502
// whose record is Failed has none (nothing will be tried).
func TestProviderFailed502CarriesRetryAfter(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	retryAfter := func(r *apptest.Resp) int {
		t.Helper()
		v := r.Header.Get("Retry-After")
		require.NotEmpty(t, v, "Retry-After of %s", r.Raw)
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}

	fake.Fail(cloudflaretest.Fault{Status: http.StatusTooManyRequests, RetryAfter: 30, Method: "POST"})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"status":"Pending"`)
	assert.GreaterOrEqual(t, retryAfter(r), 29, "the provider's 30 s")

	fake.Fail(cloudflaretest.Fault{Status: http.StatusServiceUnavailable, RetryAfter: 90, Method: "POST"})
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.GreaterOrEqual(t, retryAfter(r), 89, "the provider's 90 s")

	// A revocation the provider puts off stays Revoking, with its Retry-After.
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	fake.Fail(cloudflaretest.Fault{Status: http.StatusServiceUnavailable, RetryAfter: 60, Method: "DELETE"})
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"status":"Revoking"`)
	assert.GreaterOrEqual(t, retryAfter(r), 59, "the provider's 60 s")

	// Failed: nothing will be tried, no Retry-After.
	fake.Fail(cloudflaretest.Fault{Status: http.StatusBadRequest, Method: "POST"})
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Contains(t, string(r.Raw), `"status":"Failed"`)
	assert.Empty(t, r.Header.Get("Retry-After"))
}
