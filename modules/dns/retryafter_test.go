package dns_test

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
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

// TestProviderRetryAfterOfHalfAnHourIsHonoured: a 429 asking for 1800 s holds the record's next
// attempt back the whole 1800 s (the finisher's cap is a day, not 10 minutes), and the 502 says
// so in its Retry-After. Time is moved on by moving next_attempt_at back: 1790 s later the
// finisher still does not call the provider; past the 1800 s it creates the record.
func TestProviderRetryAfterOfHalfAnHourIsHonoured(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	fake.Fail(cloudflaretest.Fault{Status: http.StatusTooManyRequests, RetryAfter: 1800, Method: "POST"})
	before := time.Now()
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	require.Equal(t, "Pending", got.Status)
	n, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err, "Retry-After of %s", r.Raw)
	assert.GreaterOrEqual(t, n, 1790, "the provider's 1800 s")

	var next time.Time
	require.NoError(t, a.DB.QueryRow("SELECT next_attempt_at FROM dns_records WHERE id = ?", got.ID).Scan(&next))
	assert.False(t, next.Before(before.Add(1800*time.Second)), "next attempt in %s, sooner than the provider's 1800 s", next.Sub(before))

	calls := fake.Calls()
	_, err = a.DB.Exec("UPDATE dns_records SET next_attempt_at = next_attempt_at - interval '1790 seconds' WHERE id = ?", got.ID)
	require.NoError(t, err)
	a.Settle(3 * time.Second)
	assert.Equal(t, calls, fake.Calls(), "no call to the provider 1790 s later")
	assert.Equal(t, "Pending", statusOf(t, a, got.ID))

	_, err = a.DB.Exec("UPDATE dns_records SET next_attempt_at = next_attempt_at - interval '15 seconds' WHERE id = ?", got.ID)
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	assert.Equal(t, "Active", statusOf(t, a, got.ID), "created once the wait is over")
	assert.EqualValues(t, 1, fake.Creates())
}

func statusOf(t *testing.T, a *apptest.App, id int64) string {
	t.Helper()
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE id = ?", id).Scan(&status))
	return status
}

// TestRepeatedRevokeWaitsForTheProvidersRetryAfter: a revocation the provider answered 429 with
// Retry-After: 300 stays Revoking; asking again meanwhile answers 502 with the remaining wait and
// does not call the provider. Once the wait is over the finisher deletes the record.
func TestRepeatedRevokeWaitsForTheProvidersRetryAfter(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	fake.Fail(cloudflaretest.Fault{Status: 429, RetryAfter: 300, Method: "DELETE"})
	path := fmt.Sprintf("/api/me/dns/%d", got.ID)
	r = a.Do(apptest.Request{Method: "DELETE", Path: path, Token: u.Token})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	calls := fake.Calls()
	for i := 0; i < 5; i++ {
		r = a.Do(apptest.Request{Method: "DELETE", Path: path, Token: u.Token})
		require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
		assert.Contains(t, string(r.Raw), `"status":"Revoking"`)
		secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
		require.NoError(t, err)
		assert.Greater(t, secs, 250, "the remaining wait")
	}
	assert.Equal(t, calls, fake.Calls(), "no provider call before the provider's wait is over")
	assert.Contains(t, fake.Records(), got.ProviderRecordID)

	assert.Equal(t, "Revoked", retryNow(t, a, got.ID))
	assert.NotContains(t, fake.Records(), got.ProviderRecordID)
}
