package dns_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
	"provisioner/platform/testutil"
)

// backlogBudget is the outbound budget of the drain: calls a minute, shared by both replicas; the
// fake provider allows as many in any trailing minute.
const backlogBudget = 3000

// backlog is a drain of due records by two replicas (two services with their finishers on one
// control database and one Redis key prefix, so one outbound budget, Dns:OutboundRate) against
// the fake provider, which answers 429 past backlogBudget calls in any trailing minute and, when
// failRate > 0, that fraction of calls with a 503.
type backlog struct {
	fake     *cloudflaretest.Fake
	a        *apptest.App
	mu       sync.Mutex
	calls    []time.Time // answered calls, 429s and faults included
	tooMany  int
	failRate float64
}

func newBacklog(tb testing.TB, rate string, failRate float64) *backlog {
	b := &backlog{fake: cloudflaretest.New("zone123", token, "example.com"), failRate: failRate}
	tb.Cleanup(b.fake.Close)
	b.fake.SetRandFault(b.fault)
	kv := map[string]any{"Dns:BaseUrl": b.fake.URL, "Dns:ZoneId": "zone123", "Dns:ApiToken": token, "Dns:ZoneName": "example.com",
		"Dns:CellSubdomain": "cell", "Dns:DefaultContent": "203.0.113.10", "Dns:TimeoutSeconds": 5,
		"Dns:OutboundRate": rate, "Redis:KeyPrefix": "backlog" + testutil.RandomSuffix(),
		// Every record Active in the end, even against a provider failing 30% of calls.
		"Finisher:MaxAttempts": 1000}
	b.a = apptest.Start(tb, apptest.With(kv), apptest.WithFinisher())
	apptest.Start(tb, apptest.With(kv), apptest.WithFinisher())
	tb.Cleanup(func() {
		_, _ = b.a.DB.Exec("UPDATE dns_records SET status = 'Failed' WHERE status = 'Pending'")
	})
	return b
}

// fault records each call and answers 429 past the budget in the trailing minute, or a 503 at
// the fail rate.
func (b *backlog) fault() *cloudflaretest.Fault {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.calls = append(b.calls, now)
	inMinute := 0
	for i := len(b.calls) - 1; i >= 0 && now.Sub(b.calls[i]) < time.Minute; i-- {
		inMinute++
	}
	if inMinute > backlogBudget {
		b.tooMany++
		return &cloudflaretest.Fault{Status: http.StatusTooManyRequests, RetryAfter: 1}
	}
	if b.failRate > 0 && rand.Float64() < b.failRate {
		return &cloudflaretest.Fault{Status: http.StatusServiceUnavailable}
	}
	return nil
}

// seed stores n Pending records, due now, of 20 users, as an outage leaves them.
func (b *backlog) seed(tb testing.TB, n int) string {
	tag := testutil.RandomSuffix()
	_, err := b.a.DB.Exec(`INSERT INTO users (email, full_name, role, security_stamp)
		SELECT 'backlog-' || g || '-' || ? || '@example.test', 'Backlog', 'User', 1 FROM generate_series(1, 20) g`, tag)
	require.NoError(tb, err)
	_, err = b.a.DB.Exec(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status, next_attempt_at)
		SELECT u.id, 'bl-' || ? || '-' || g, 'bl-' || ? || '-' || g || '.cell', 'bl-' || ? || '-' || g || '.cell.example.com',
		       '203.0.113.10', 1, 'Pending', now()
		FROM generate_series(1, ?) g JOIN users u ON u.email = 'backlog-' || (1 + g % 20) || '-' || ? || '@example.test'`,
		tag, tag, tag, n, tag)
	require.NoError(tb, err)
	return tag
}

// drain waits until no record of tag is Pending and returns the time from the first call to then.
func (b *backlog) drain(tb testing.TB, tag string) time.Duration {
	start := time.Now()
	for {
		var pending int
		require.NoError(tb, b.a.DB.QueryRow(`SELECT count(*) FROM dns_records WHERE label LIKE ? AND status = 'Pending'`,
			"bl-"+tag+"-%").Scan(&pending))
		if pending == 0 {
			break
		}
		if time.Since(start) > 15*time.Minute {
			tb.Fatalf("%d records still Pending after 15 minutes", pending)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.calls) == 0 {
		return 0
	}
	return b.calls[len(b.calls)-1].Sub(b.calls[0])
}

// check asserts every record of tag Active, each made at the provider exactly once, and no 429.
func (b *backlog) check(tb testing.TB, tag string, n int) {
	var active int
	require.NoError(tb, b.a.DB.QueryRow(`SELECT count(*) FROM dns_records WHERE label LIKE ? AND status = 'Active'`,
		"bl-"+tag+"-%").Scan(&active))
	assert.Equal(tb, n, active, "every record Active")
	byName := map[string]int{}
	for _, r := range b.fake.Records() {
		byName[r.Name]++
	}
	twice := 0
	for _, c := range byName {
		if c > 1 {
			twice++
		}
	}
	assert.Equal(tb, n, len(byName), "one provider record per row")
	assert.Zero(tb, twice, "records made twice")
	assert.EqualValues(tb, n, b.fake.Creates(), "creates at the provider")
	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Zero(tb, b.tooMany, "provider 429s")
}

// TestBacklogDrainsOnce: 200 due records drained by two replicas sharing an outbound budget of
// 3,000 calls a minute: every record Active, none made twice, no provider 429; then the same
// with the provider failing 30% of calls (503).
func TestBacklogDrainsOnce(t *testing.T) {
	for _, failRate := range []float64{0, 0.3} {
		t.Run(fmt.Sprintf("fail=%.0f%%", failRate*100), func(t *testing.T) {
			b := newBacklog(t, fmt.Sprintf("%d-M", backlogBudget), failRate)
			tag := b.seed(t, 200)
			b.drain(t, tag)
			b.check(t, tag, 200)
		})
	}
}

// BenchmarkBacklogDrain: BACKLOG (default 1,000) due records drained by two replicas sharing an
// outbound budget of 3,000 calls a minute, with the provider healthy and failing 30% of calls: as
// "3000-M" (a minute's calls may go at once) and as "50-S" (the same rate a second). It reports
// the calls made a second while work remained ÷ the budget's 50 a second (target ≥ 0.95; above 1
// when the whole backlog fits one minute's budget), the same until 90% of the calls were made,
// the calls a record took and the drain's time.
// A record not Active, made twice, or a provider 429 fails it.
func BenchmarkBacklogDrain(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("BACKLOG")); err == nil && v > 0 {
		n = v
	}
	for _, rate := range []string{fmt.Sprintf("%d-M", backlogBudget), fmt.Sprintf("%d-S", backlogBudget/60)} {
		for _, failRate := range []float64{0, 0.3} {
			b.Run(fmt.Sprintf("budget=%s/fail=%.0f%%", rate, failRate*100), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					bl := newBacklog(b, rate, failRate)
					tag := bl.seed(b, n)
					took := bl.drain(b, tag)
					bl.check(b, tag, n)
					bl.mu.Lock()
					calls := len(bl.calls)
					// The rate until 90% of the calls were made: without the tail of records whose
					// attempts failed, waiting out the finisher's backoff.
					p90 := calls * 9 / 10
					perSec90 := float64(p90-1) / bl.calls[p90-1].Sub(bl.calls[0]).Seconds()
					bl.mu.Unlock()
					perSec := float64(calls-1) / took.Seconds()
					b.ReportMetric(perSec90/(backlogBudget/60.0), "x-budget-first90%")
					b.ReportMetric(perSec, "calls/s")
					b.ReportMetric(perSec/(backlogBudget/60.0), "x-budget")
					b.ReportMetric(took.Seconds(), "drain-s")
					b.ReportMetric(float64(calls)/float64(n), "calls/record")
				}
			})
		}
	}
}
