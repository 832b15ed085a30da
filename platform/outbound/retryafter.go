package outbound

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter bounds a parsed Retry-After (a day): no overflow, and no absurd wait.
const MaxRetryAfter = 24 * time.Hour

// ParseRetryAfter reads the value of a provider's Retry-After header (RFC 9110 §10.2.3): either
// delay-seconds ("120") or an HTTP-date, taken relative to now. Anything else, a negative delay or
// a date not after now is 0 (no wait asked for); a longer wait than a day is a day.
func ParseRetryAfter(value string, now time.Time) time.Duration {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0
	}
	if strings.Trim(value, "0123456789") == "" {
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil || n > uint64(MaxRetryAfter/time.Second) { // out of range: a very long wait
			return MaxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(value)
	if err != nil {
		return 0
	}
	return min(max(t.Sub(now), 0), MaxRetryAfter)
}
