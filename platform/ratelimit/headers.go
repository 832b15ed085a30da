package ratelimit

import (
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/danielgtaylor/huma/v2"
	"github.com/gofiber/fiber/v2"
)

// SetHeaders writes r's headers on c unless a tighter limit (fewer remaining hits) already did; the
// tightest Result is kept in c.Locals(TightestLocal). A zero Result is ignored.
func SetHeaders(c *fiber.Ctx, r Result) {
	if r.Limit == 0 {
		return
	}
	if prev, ok := c.Locals(TightestLocal).(Result); ok && prev.Remaining < r.Remaining {
		return
	}
	c.Locals(TightestLocal, r)
	// The hot path (every limited request, often twice): canonical names set as they are (no
	// normalising), values formatted into one buffer (no string per header). Same headers as
	// WriteHeaders.
	h := &c.Response().Header
	var buf [160]byte
	v := buf[:0]
	limit := len(v)
	v = strconv.AppendInt(v, r.Limit, 10)
	remaining := len(v)
	v = strconv.AppendInt(v, r.Remaining, 10)
	reset := len(v)
	v = strconv.AppendInt(v, int64(ceilSeconds(time.Until(r.Reset))), 10)
	end := len(v)
	h.SetCanonical(headerKeys[0], v[limit:remaining])
	h.SetCanonical(headerKeys[1], v[remaining:reset])
	h.SetCanonical(headerKeys[2], v[reset:end])
	policy := len(v)
	v = append(v, v[limit:remaining]...)
	v = append(v, ";w="...)
	v = strconv.AppendInt(v, int64(r.Period/time.Second), 10)
	h.SetCanonical(headerKeys[3], v[policy:])
	both := len(v)
	v = append(append(v, "limit="...), v[limit:remaining]...)
	v = append(append(v, ", remaining="...), v[remaining:reset]...)
	v = append(append(v, ", reset="...), v[reset:end]...)
	h.SetCanonical(headerKeys[4], v[both:])
}

// headerKeys are HeaderNames as fasthttp writes (and finds) them: each word capitalised, the rest
// lower case (X-Ratelimit-Limit), for SetHeaders.
var headerKeys = func() (k [len(HeaderNames)][]byte) {
	for i, n := range HeaderNames {
		b := []byte(strings.ToLower(n))
		for j := range b {
			if j == 0 || b[j-1] == '-' {
				b[j] = byte(unicode.ToUpper(rune(b[j])))
			}
		}
		k[i] = b
	}
	return k
}()

// HeaderNames are the headers WriteHeaders writes (a route that relays another service's 429
// takes them off its answer).
var HeaderNames = [...]string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit-Policy", "RateLimit"}

// DocHeaders describes HeaderNames for the OpenAPI document: httpx.ServerOptions.LimitHeaders,
// which declares them on the responses of every operation the limits count. A fresh map.
func DocHeaders() map[string]*huma.Param {
	integer := func() *huma.Schema { return &huma.Schema{Type: "integer", Minimum: new(float64)} }
	const tightest = " of the tightest limit that applied."
	return map[string]*huma.Param{
		HeaderNames[0]: {Description: "Hits allowed per window" + tightest, Schema: integer()},
		HeaderNames[1]: {Description: "Hits left in the current window" + tightest + " Hits other instances reserved count as spent.", Schema: integer()},
		HeaderNames[2]: {Description: "Seconds until the window resets" + tightest, Schema: integer()},
		HeaderNames[3]: {Description: "IETF draft: `<limit>;w=<window seconds>`" + tightest,
			Schema: &huma.Schema{Type: "string", Pattern: `^[0-9]+;w=[0-9]+$`}, Example: "100;w=60"},
		HeaderNames[4]: {Description: "IETF draft: `limit=<n>, remaining=<n>, reset=<seconds>`" + tightest,
			Schema:  &huma.Schema{Type: "string", Pattern: `^limit=[0-9]+, remaining=[0-9]+, reset=[0-9]+$`},
			Example: "limit=100, remaining=99, reset=60"},
	}
}

// WriteHeaders writes X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset (seconds until
// the window resets, not a timestamp) and the IETF draft pair RateLimit-Policy ("<limit>;w=<window
// seconds>") and RateLimit ("limit=<n>, remaining=<n>, reset=<seconds>") through set.
func WriteHeaders(set func(k, v string), r Result) {
	reset := strconv.Itoa(ceilSeconds(time.Until(r.Reset)))
	limit, remaining := strconv.FormatInt(r.Limit, 10), strconv.FormatInt(r.Remaining, 10)
	set(HeaderNames[0], limit)
	set(HeaderNames[1], remaining)
	set(HeaderNames[2], reset)
	set(HeaderNames[3], limit+";w="+strconv.Itoa(int(r.Period/time.Second)))
	set(HeaderNames[4], "limit="+limit+", remaining="+remaining+", reset="+reset)
}
