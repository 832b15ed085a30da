package aikeys

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"provisioner/platform/httpx"
	"provisioner/platform/ratelimit"
)

// fastGenerate answers POST /api/ai/generate ahead of its huma operation when the request is plain:
// a JSON body that decodes strictly into GenerateInput and meets its schema and Resolve as they
// stand, and one X-API-Key. It runs the operation's own steps (key, per-key limit, upstream,
// metering) and writes the envelope with huma's own JSON format, so a client cannot tell which
// answered; it skips what the huma operation pays on every request (the body decoded a second time
// into a map for the schema check, the validation walk, huma's context and response plumbing), a
// third of the gateway's own time per request (README § Performance, P2). Anything else (another
// Content-Type, a missing or repeated key header, a body the checks below do not plainly accept)
// goes on, untouched, to the huma operation, which answers it with the same checks, order and
// messages as every other route. The decision is taken before anything has a side effect (the
// rate limit's hit), so nothing is done twice. TestFastGenerateAnswersAsTheOperationDoes holds the
// two to the same answers.
func (h *Handler) fastGenerate(c *fiber.Ctx) error {
	if fastGenerateOff.Load() {
		return c.Next()
	}
	in, ok := plainGenerateInput(c)
	if !ok {
		return c.Next()
	}
	presented, unambiguous := singleHeader(c, "X-API-Key")
	if !unambiguous || presented == "" {
		return c.Next()
	}
	p, err := h.keys.Authenticate(c.UserContext(), presented)
	if err != nil {
		return httpx.WriteHandlerError(c, err)
	}
	r, err := h.limiter.Enforce(c.UserContext(), "AiGenerate", strconv.FormatInt(p.KeyID, 10))
	if r.Limit > 0 {
		ratelimit.SetHeaders(c, r)
	}
	if err != nil {
		return httpx.WriteHandlerError(c, limitError(err))
	}
	g, err := h.generate(c, in)
	if err != nil {
		return httpx.WriteHandlerError(c, err)
	}
	h.meter.Add(p.KeyID, g.Usage.PromptTokens, g.Usage.CompletionTokens)
	fastGenerateServed.Add(1)
	return httpx.WriteHumaJSON(c, http.StatusOK, httpx.OK("OK", *g).Body)
}

// fastGenerateOff turns fastGenerate off, and fastGenerateServed counts the generations it
// answered (tests compare the two ways of answering).
var (
	fastGenerateOff    atomic.Bool
	fastGenerateServed atomic.Int64
)

// plainGenerateInput decodes c's body into GenerateInput when the huma operation would take it as
// it is: JSON by its Content-Type, decoded as huma's operations decode (exact member names, no
// duplicates, UTF-8, whole numbers for integers) with no member the struct lacks, and every value
// within the schema (GenerateInput's tags) and the Resolve check. A body holding "null" or an
// escaped NUL anywhere (even inside a string) is left to the operation: a null member is a type
// error there, and NUL is refused by name; neither is worth telling apart here.
func plainGenerateInput(c *fiber.Ctx) (GenerateInput, bool) {
	var in GenerateInput
	// Canonical by now (responseHeaders), but for the charset's case.
	if ct := string(c.Request().Header.ContentType()); ct != fiber.MIMEApplicationJSON && !strings.EqualFold(ct, fiber.MIMEApplicationJSONCharsetUTF8) {
		return in, false
	}
	body := c.Body()
	if bytes.Contains(body, []byte("null")) || bytes.Contains(body, []byte(`\u0000`)) ||
		httpx.DecodeStrictly(body, &in) != nil {
		return in, false
	}
	ok := between(utf8.RuneCountInString(in.Prompt), 1, 200000) &&
		utf8.RuneCountInString(in.System) <= 100000 &&
		utf8.RuneCountInString(in.Model) <= 200 &&
		(in.MaxTokens == nil || between(*in.MaxTokens, 1, 65536)) &&
		(in.Temperature == nil || (*in.Temperature >= 0 && *in.Temperature <= 2)) &&
		httpx.DisplayTextProblem(in.Model) == ""
	return in, ok
}

func between(n, lo, hi int) bool { return n >= lo && n <= hi }
