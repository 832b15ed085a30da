package outbound_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"provisioner/platform/outbound"
)

// TestParseRetryAfter: both forms of the header (delay-seconds and an HTTP-date), and values that
// ask for no wait or an absurd one.
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"120", 120 * time.Second},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"Mon, 23 Nov 2026 22:02:00 GMT", 2 * time.Minute},
		{"Monday, 23-Nov-26 22:00:30 GMT", 30 * time.Second}, // RFC 850, still accepted by HTTP/1.1
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},   // in the past
		{"", 0},
		{"-5", 0},
		{"1.5", 0},
		{"soon", 0},
		{"999999", 24 * time.Hour},
		{"99999999999999999999999", 24 * time.Hour}, // overflows uint64
	} {
		assert.Equal(t, tc.want, outbound.ParseRetryAfter(tc.value, now), "Retry-After: %q", tc.value)
	}
}
