package dns_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpentBudgetIsNotAFailedAttempt: a call our own outbound budget (Dns:OutboundRate) refuses is
// never sent, so it is not a failed attempt: however often the finisher meets the spent budget, the
// record stays Pending with its attempts untouched (never Failed after Finisher:MaxAttempts), and
// the next attempt and the 502's Retry-After follow the budget's reset, not the plain backoff.
func TestSpentBudgetIsNotAFailedAttempt(t *testing.T) {
	a, fake := setup(t, map[string]any{"Dns:OutboundRate": "2-H", "Finisher:MaxAttempts": 3})
	u := a.Register(t)
	require.Equal(t, http.StatusCreated, a.Post("/api/me/dns", u.Token, map[string]any{"label": label()}).Status) // 2 calls
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusBadGateway, r.Status, string(r.Raw))
	var got rec
	r.Decode(t, &got)
	require.Equal(t, "Pending", got.Status)
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.Greater(t, secs, 600, "Retry-After follows the budget's reset (about an hour away)")

	for i := 0; i < 5; i++ {
		assert.Equal(t, "Pending", retryNow(t, a, got.ID), "round %d: a budget refusal is no failed attempt", i)
	}
	var attempts int
	var next time.Time
	require.NoError(t, a.DB.QueryRow("SELECT attempts, next_attempt_at FROM dns_records WHERE id = ?", got.ID).Scan(&attempts, &next))
	assert.Zero(t, attempts)
	assert.Greater(t, time.Until(next), 10*time.Minute, "the next attempt waits for the budget's reset")
	assert.EqualValues(t, 2, fake.Calls(), "nothing past the budget reached the provider")
}
