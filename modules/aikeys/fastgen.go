package aikeys

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/gofiber/fiber/v2"

	"provisioner/platform/httpx"
	"provisioner/platform/ratelimit"
)

// fastGenerate answers a plain POST /api/ai/generate (a JSON body that decodes strictly into
// GenerateInput and passes its checks, one X-API-Key) ahead of its huma operation, with the same
// steps and the same envelope, skipping huma's second decode and validation walk. Anything else
// goes on untouched to the huma operation; the choice is made before any side effect.
// TestFastGenerateAnswersAsTheOperationDoes holds the two to the same answers.
func (h *Handler) fastGenerate(c *fiber.Ctx) error {
	if h.genLimits == nil || fastGenerateOff.Load() {
		return c.Next()
	}
	in, ok := plainGenerateInput(c, h.genLimits)
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
	g, err := h.generate(c, p, in)
	if err != nil {
		return httpx.WriteHandlerError(c, err)
	}
	fastGenerateServed.Add(1)
	c.Status(http.StatusOK)
	c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
	c.Response().SetBodyRaw(appendGenerationEnvelope(make([]byte, 0, 192+len(g.Text)+len(g.Model)), g))
	return nil
}

// fastGenerateOff turns fastGenerate off, and fastGenerateServed counts the generations it
// answered (tests compare the two ways of answering).
var (
	fastGenerateOff    atomic.Bool
	fastGenerateServed atomic.Int64
)

// plainGenerateInput decodes c's body into GenerateInput when the huma operation would take it as
// it is: JSON by its Content-Type, decoded as huma's operations decode (exact member names, no
// duplicates, UTF-8, whole numbers for integers) with no member the struct lacks, every value within
// the schema's limits (l) and the operation's Resolve check. A body holding "null" or an escaped NUL
// anywhere (even inside a string) is left to the operation: a null member is a type error there,
// and NUL is refused by name; neither is worth telling apart here.
func plainGenerateInput(c *fiber.Ctx, l *generateLimits) (GenerateInput, bool) {
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
	ok := l.prompt.holds(in.Prompt) && l.system.holds(in.System) && l.model.holds(in.Model) &&
		(in.MaxTokens == nil || l.maxTokens.holds(float64(*in.MaxTokens))) &&
		(in.Temperature == nil || l.temperature.holds(*in.Temperature)) &&
		httpx.DisplayTextProblem(in.Model) == ""
	return in, ok
}

// generateLimits are the limits of GenerateInput's schema as the OpenAPI document states them,
// read once the operation is registered (readGenerateLimits), so the shortcut checks what the schema
// checks and cannot drift from the struct tags.
type generateLimits struct {
	prompt, system, model  lengthLimit
	maxTokens, temperature numberLimit
}

// lengthLimit bounds a string's length in characters (as huma counts: runes).
type lengthLimit struct{ min, max int }

func (l lengthLimit) holds(s string) bool {
	n := utf8.RuneCountInString(s)
	return n >= l.min && n <= l.max
}

// numberLimit bounds a number, both ends included.
type numberLimit struct{ min, max float64 }

func (l numberLimit) holds(f float64) bool { return f >= l.min && f <= l.max }

// readGenerateLimits reads the limits of the generate operation's body schema from doc. It refuses
// (and the shortcut stays off) a schema saying anything the shortcut does not check: a member it
// does not know, a pattern, format, enum, exclusive bound or multipleOf, a nullable member, or a
// required member that may be empty (a missing member decodes as empty, so only a minimum length
// tells it from a given one).
func readGenerateLimits(doc *huma.OpenAPI) (*generateLimits, error) {
	op := doc.Paths["/api/ai/generate"]
	if op == nil || op.Post == nil || op.Post.RequestBody == nil || op.Post.RequestBody.Content["application/json"] == nil {
		return nil, errors.New("no JSON body documented for POST /api/ai/generate")
	}
	sc := op.Post.RequestBody.Content["application/json"].Schema
	if sc != nil && sc.Ref != "" {
		sc = doc.Components.Schemas.SchemaFromRef(sc.Ref)
	}
	if sc == nil || sc.Type != huma.TypeObject {
		return nil, errors.New("the body schema is no object")
	}
	if ap, ok := sc.AdditionalProperties.(bool); !ok || ap {
		return nil, errors.New("the body schema allows members of any name")
	}
	l := &generateLimits{}
	strs := map[string]*lengthLimit{"prompt": &l.prompt, "system": &l.system, "model": &l.model}
	nums := map[string]*numberLimit{"maxTokens": &l.maxTokens, "temperature": &l.temperature}
	if len(sc.Properties) != len(strs)+len(nums) {
		return nil, fmt.Errorf("the body schema has %d members, the shortcut knows %d", len(sc.Properties), len(strs)+len(nums))
	}
	for name, p := range sc.Properties {
		if p.Pattern != "" || len(p.Enum) > 0 || p.ExclusiveMinimum != nil || p.ExclusiveMaximum != nil || p.MultipleOf != nil ||
			p.Nullable || p.Ref != "" || p.OneOf != nil || p.AnyOf != nil || p.AllOf != nil || p.Not != nil {
			return nil, fmt.Errorf("member %q: a rule the shortcut does not check", name)
		}
		if ll, ok := strs[name]; ok && p.Type == huma.TypeString && p.Format == "" {
			*ll = lengthLimit{0, math.MaxInt}
			if p.MinLength != nil {
				ll.min = *p.MinLength
			}
			if p.MaxLength != nil {
				ll.max = *p.MaxLength
			}
			continue
		}
		if nl, ok := nums[name]; ok && (p.Type == huma.TypeInteger || p.Type == huma.TypeNumber) {
			*nl = numberLimit{math.Inf(-1), math.Inf(1)}
			if p.Minimum != nil {
				nl.min = *p.Minimum
			}
			if p.Maximum != nil {
				nl.max = *p.Maximum
			}
			continue
		}
		return nil, fmt.Errorf("member %q: not a member the shortcut knows, or of another type", name)
	}
	for _, name := range sc.Required {
		if ll, ok := strs[name]; !ok || ll.min < 1 {
			return nil, fmt.Errorf("required member %q may be empty", name)
		}
	}
	return l, nil
}
