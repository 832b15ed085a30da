package dns_test

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
	"provisioner/platform/testutil"
)

// syncBuffer is a log sink safe for the app's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTransportErrorsShowNoInternals: a provider that cannot be reached or does not answer in
// time gives a stored and returned errorMessage that names what happened ("DNS provider
// unreachable", "DNS provider timed out") and nothing of our setup (the URL, the zone id, the
// address); the details are in the server log, without the API token.
func TestTransportErrorsShowNoInternals(t *testing.T) {
	logs := &syncBuffer{}
	capture := apptest.WithFx(fx.Decorate(func(*slog.Logger) *slog.Logger {
		return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	internals := []string{"zone123", l.Addr().String(), "/zones/", "dns_records", token}

	a, _ := setup(t, map[string]any{"Dns:BaseUrl": closed, "Finisher:MaxAttempts": 1}, capture)
	u := a.Register(t)
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Failed", got.Status, "attempts ran out (Finisher:MaxAttempts 1)")
	assert.Equal(t, "DNS provider unreachable", got.ErrorMessage)
	var stored, last string
	require.NoError(t, a.DB.QueryRow("SELECT error_message, last_error FROM dns_records WHERE id = ?", got.ID).Scan(&stored, &last))
	for _, s := range internals {
		assert.NotContains(t, string(r.Raw), s)
		assert.NotContains(t, stored+" "+last, s)
		assert.NotContains(t, string(a.Get("/api/me/dns", u.Token).Raw), s)
	}
	assert.Contains(t, logs.String(), "zone123", "the details are in the server log")
	assert.Contains(t, logs.String(), "connection refused")

	b, fake := setup(t, nil, capture)
	v := b.Register(t)
	slow := cloudflaretest.Fault{Delay: 1500 * time.Millisecond, Status: 200, Method: "GET"}
	fake.Fail(slow, slow, slow)
	r = b.Post("/api/me/dns", v.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	assert.Equal(t, "DNS provider timed out", got.ErrorMessage)
	for _, s := range internals {
		assert.NotContains(t, string(r.Raw), s)
	}
	assert.NotContains(t, logs.String(), token, "never the API token in the log")
}

func TestTransientFailuresRetriedWithRetryAfter(t *testing.T) {
	// The call's retries and their waits fit in Dns:TimeoutSeconds, which bounds the call whole.
	a, fake := setup(t, map[string]any{"Dns:TimeoutSeconds": 3})
	u := a.Register(t)
	// Inside one attempt: a 503 then a 429 with Retry-After: 1 are retried, then it succeeds.
	fake.Fail(cloudflaretest.Fault{Status: 503, Method: "POST"}, cloudflaretest.Fault{Status: 429, RetryAfter: 1, Method: "POST"})
	start := time.Now()
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "Retry-After was honoured")
	assert.EqualValues(t, 1, fake.Creates())
	// A 408 (the provider or a proxy timed the request out) is retried the same way.
	fake.Fail(cloudflaretest.Fault{Status: 408, Method: "POST"})
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
	assert.EqualValues(t, 2, fake.Creates())

	// Still failing after the call's retries: 502, record Pending with the error, finished later.
	fake.Fail(cloudflaretest.Fault{Status: 500, Method: "POST"}, cloudflaretest.Fault{Status: 500, Method: "POST"}, cloudflaretest.Fault{Status: 500, Method: "POST"})
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	assert.Contains(t, got.ErrorMessage, "500")
	status := retryNow(t, a, got.ID)
	assert.Equal(t, "Active", status)

	// A timeout (slow provider) is transient too.
	fake.Fail(cloudflaretest.Fault{Delay: 3500 * time.Millisecond, Status: 200, Method: "GET"})
	r = a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	assert.Equal(t, http.StatusBadGateway, r.Status)
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
}

// TestProviderRetryAfterHoldsTheFinisherBack: a 429 whose Retry-After is longer than one call
// may wait ends the attempt; the record stays Pending and the finisher does not call the provider
// again before the wait is over.
func TestProviderRetryAfterHoldsTheFinisherBack(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	fake.Fail(cloudflaretest.Fault{Status: 429, RetryAfter: 30, Method: "POST"})
	before := time.Now()
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	assert.Less(t, time.Since(before), 10*time.Second, "the request does not sit out the Retry-After")
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	assert.Contains(t, got.ErrorMessage, "429")

	var next time.Time
	require.NoError(t, a.DB.QueryRow("SELECT next_attempt_at FROM dns_records WHERE id = ?", got.ID).Scan(&next))
	assert.False(t, next.Before(before.Add(30*time.Second)), "next attempt in %s, sooner than the provider's Retry-After", next.Sub(before))
	calls := fake.Calls()
	time.Sleep(1500 * time.Millisecond) // past the first plain backoff (~1 s)
	a.Settle(3 * time.Second)
	assert.Equal(t, calls, fake.Calls(), "no call to the provider before the wait")
	var status string
	require.NoError(t, a.DB.QueryRow("SELECT status FROM dns_records WHERE id = ?", got.ID).Scan(&status))
	assert.Equal(t, "Pending", status)

	// Once the wait is over, the finisher creates it.
	status = retryNow(t, a, got.ID)
	assert.Equal(t, "Active", status)
	assert.EqualValues(t, 1, fake.Creates())
}

func TestRevokeFailureStaysRevokingForTheFinisher(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusCreated, r.Status)
	var got rec
	r.Decode(t, &got)
	fake.Fail(cloudflaretest.Fault{Status: 502, Method: "DELETE"}, cloudflaretest.Fault{Status: 502, Method: "DELETE"}, cloudflaretest.Fault{Status: 502, Method: "DELETE"})
	r = a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/dns/%d", got.ID), Token: u.Token})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	r.Decode(t, &got)
	assert.Equal(t, "Revoking", got.Status)
	assert.NotEmpty(t, got.ErrorMessage)
	assert.Contains(t, fake.Records(), got.ProviderRecordID)

	status := retryNow(t, a, got.ID)
	assert.Equal(t, "Revoked", status)
	assert.NotContains(t, fake.Records(), got.ProviderRecordID)
}

// TestCrashAfterTheCallAdoptsTheRecord: the provider created the record but the process died
// before recording the outcome; the finisher looks the name up and adopts it, never creating a
// second one.
func TestCrashAfterTheCallAdoptsTheRecord(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	l := label()
	// The "crash": the provider stores the record, but its answer never arrives (the call times
	// out and is not sent again): the record stays Pending. The finisher's attempt looks the name
	// up and adopts it.
	fake.SetAfterCreate(func(string) { time.Sleep(1500 * time.Millisecond) })
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
	fake.SetAfterCreate(nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status)
	require.Equal(t, "Active", retryNow(t, a, got.ID))
	require.NoError(t, a.DB.QueryRow("SELECT provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&got.ProviderRecordID))
	assert.EqualValues(t, 1, fake.Creates(), "nothing created twice: %v", fake.Records())
	assert.Contains(t, fake.Records(), got.ProviderRecordID, "the existing record was adopted")
	var adopted bool
	require.NoError(t, a.DB.QueryRow("SELECT (details->>'adopted')::bool FROM audit_events WHERE action = 'dns.created' AND target_id = ?", fmt.Sprint(got.ID)).Scan(&adopted))
	assert.True(t, adopted)

	// The outcome lost after the call (row still Pending): the finisher looks up and adopts.
	_, err := a.DB.Exec("UPDATE dns_records SET status = 'Pending', provider_record_id = '', next_attempt_at = now() WHERE id = ?", got.ID)
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	var status, providerID string
	require.NoError(t, a.DB.QueryRow("SELECT status, provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&status, &providerID))
	assert.Equal(t, "Active", status)
	assert.Equal(t, got.ProviderRecordID, providerID)
	assert.EqualValues(t, 1, fake.Creates(), "nothing created twice")

	// A row left Pending by a crash before the call: the finisher creates it once.
	_, err = a.DB.Exec(`INSERT INTO dns_records (user_id, label, name, fqdn, content, record_ttl, status)
		VALUES (?, ?, ?, ?, '203.0.113.77', 1, 'Pending')`, u.ID, "crash-"+l, "crash-"+l+".cell", "crash-"+l+".cell.example.com")
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	assert.EqualValues(t, 2, fake.Creates())
	a.Settle(time.Second)
	assert.EqualValues(t, 2, fake.Creates())
}

// TestLostCreateAnswerThenFailedLookupStaysPendingAndIsAdopted: our record reaches the provider
// between our lookup and our create (an earlier create whose answer was lost, landing late); the
// create gets 81058 (identical record), and the lookup meant to adopt it fails with 500s. The
// record stays Pending (not Failed while the provider holds it) and the finisher adopts the
// provider's record: one record at the provider, the row Active with its id.
func TestLostCreateAnswerThenFailedLookupStaysPendingAndIsAdopted(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	fake.SetBeforeCreate(func(name string) {
		var id int64
		require.NoError(t, a.DB.QueryRow("SELECT id FROM dns_records WHERE fqdn = ?", name).Scan(&id))
		fake.PutRecord(cloudflaretest.Record{Name: name, Content: "203.0.113.10", TTL: 1, Comment: markerOf(t, a, id)})
		// From now on, lookups fail (every try of the client's one call).
		fake.Fail(cloudflaretest.Fault{Status: 500, Method: "GET"}, cloudflaretest.Fault{Status: 500, Method: "GET"},
			cloudflaretest.Fault{Status: 500, Method: "GET"})
	})
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	fake.SetBeforeCreate(nil)
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	assert.Equal(t, "Pending", got.Status, "not Failed: the provider holds the record")
	assert.Contains(t, got.ErrorMessage, "81058")
	require.Len(t, fake.Records(), 1)

	_, err := a.DB.Exec("UPDATE dns_records SET next_attempt_at = now() WHERE id = ?", got.ID)
	require.NoError(t, err)
	a.Settle(5 * time.Second)
	var status, providerID string
	require.NoError(t, a.DB.QueryRow("SELECT status, provider_record_id FROM dns_records WHERE id = ?", got.ID).Scan(&status, &providerID))
	assert.Equal(t, "Active", status)
	records := fake.Records()
	require.Len(t, records, 1, "exactly one provider record")
	assert.Contains(t, records, providerID, "the row carries the provider's id")
	assert.EqualValues(t, 0, fake.Creates(), "adopted, not created again")
}

func TestConcurrentCreatesNeverDuplicate(t *testing.T) {
	a, fake := setup(t, map[string]any{"Dns:MaxRecordsPerUser": 100})
	users := make([]apptest.User, 10)
	for i := range users {
		users[i] = a.Register(t)
	}
	var wg sync.WaitGroup
	statuses := make(chan int, 60)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses <- a.Post("/api/me/dns", users[i%10].Token, map[string]any{"label": fmt.Sprintf("c%d-%s", i, testutil.RandomSuffix())}).Status
		}(i)
	}
	same := label()
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses <- a.Post("/api/me/dns", users[i].Token, map[string]any{"label": same}).Status
		}(i)
	}
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	assert.Equal(t, 51, counts[http.StatusCreated], "50 distinct labels and one winner of the shared label")
	assert.Equal(t, 9, counts[http.StatusConflict])

	ids := make([]int64, len(users))
	for i, u := range users {
		ids[i] = u.ID
	}
	rows, err := a.DB.Query("SELECT provider_record_id FROM dns_records WHERE status = 'Active' AND user_id IN (?)", bun.In(ids))
	require.NoError(t, err)
	active := map[string]bool{}
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		active[id] = true
	}
	rows.Close()
	provider := fake.Records()
	assert.Equal(t, len(active), len(provider), "exactly one provider record per Active row")
	for id := range provider {
		assert.True(t, active[id], "provider record %s has its row", id)
	}
}
