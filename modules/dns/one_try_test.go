package dns_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/modules/dns/cloudflare/cloudflaretest"
)

// TestFinisherAttemptNeverWaitsInACall: in an attempt of the finisher, a call answered 503 is
// tried again at once, and one answered 429 with Retry-After ends the attempt (where a request's
// call sits the wait out: TestTransientFailuresRetriedWithRetryAfter): the record stays Pending,
// the attempt counted and the next one no sooner than the provider asked. It then creates the
// record, once.
func TestFinisherAttemptNeverWaitsInACall(t *testing.T) {
	a, fake := setup(t, map[string]any{"Dns:TimeoutSeconds": 5}) // time for a request's call to wait 1 s
	u := a.Register(t)
	l := label()
	var id int64
	require.NoError(t, a.DB.QueryRow(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status, next_attempt_at)
		VALUES (?, ?, ?, ?, '203.0.113.10', 1, 'Pending', now()) RETURNING id`, u.ID, l, l+".cell", l+".cell.example.com").Scan(&id))
	fake.Fail(cloudflaretest.Fault{Status: 503, Method: "GET"}, cloudflaretest.Fault{Status: 429, RetryAfter: 1, Method: "GET"})
	calls := fake.Calls()
	before := time.Now()
	a.Settle(5 * time.Second)
	assert.Equal(t, calls+2, fake.Calls(), "the 503 tried again, the 429 not: no create")
	var (
		status   string
		attempts int
		next     time.Time
	)
	require.NoError(t, a.DB.QueryRow("SELECT status, attempts, next_attempt_at FROM dns_records WHERE id = ?", id).Scan(&status, &attempts, &next))
	assert.Equal(t, "Pending", status)
	assert.Equal(t, 1, attempts)
	assert.False(t, next.Before(before.Add(time.Second)), "the next attempt no sooner than the Retry-After")

	assert.Equal(t, "Active", retryNow(t, a, id))
	assert.EqualValues(t, 1, fake.Creates())
}
