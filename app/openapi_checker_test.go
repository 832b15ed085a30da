package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/ratelimit"
)

// conformance checks every answer the app gives against the served OpenAPI document: the status
// is one the operation lists, the Content-Type is a documented one for it, and the body validates
// against the documented schema (JSON Schema 2020-12, the dialect of OpenAPI 3.1, with
// santhosh-tekuri/jsonschema). It is the app client's transport, so every request of a test
// (apptest's helpers included) is checked and counted per operation.
type conformance struct {
	base     http.RoundTripper
	host     string
	ops      []*docOp
	compiler *jsonschema.Compiler

	mu       sync.Mutex
	schemas  map[string]*jsonschema.Schema
	problems []string
}

type docOp struct {
	method, path string
	re           *regexp.Regexp
	responses    map[string]map[string]bool // status -> media types (empty: no body)
	headers      map[string]map[string]bool // status -> documented header (canonical) -> required
	pointers     map[string]string          // status -> JSON pointer of the response ($ref followed)
	seen         map[int]int                // status -> answers
}

func (o *docOp) name() string { return o.method + " " + o.path }

func newConformance(t *testing.T, a *apptest.App) *conformance {
	t.Helper()
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(r.Raw, &doc))
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Raw))
	require.NoError(t, err)
	c := &conformance{base: a.Client.Transport, schemas: map[string]*jsonschema.Schema{}, compiler: jsonschema.NewCompiler()}
	if c.base == nil {
		c.base = http.DefaultTransport
	}
	u, _ := url.Parse(a.URL)
	c.host = u.Host
	c.compiler.DefaultDraft(jsonschema.Draft2020)
	c.compiler.AssertFormat()
	require.NoError(t, c.compiler.AddResource("openapi.json", parsed))
	paths, _ := doc["paths"].(map[string]any)
	for path, byMethod := range paths {
		for method, op := range byMethod.(map[string]any) {
			o := &docOp{method: strings.ToUpper(method), path: path, responses: map[string]map[string]bool{},
				headers: map[string]map[string]bool{}, pointers: map[string]string{}, seen: map[int]int{}}
			o.re = regexp.MustCompile("^" + pathParam.ReplaceAllString(strings.ReplaceAll(path, ".", `\.`), `[^/]+`) + "$")
			responses, _ := op.(map[string]any)["responses"].(map[string]any)
			for status, resp := range responses {
				// A response, and each of its headers, may be a $ref to a shared one (components).
				res, ptr := followRef(t, doc, resp, "/paths/"+pointerToken(path)+"/"+method+"/responses/"+status)
				o.pointers[status] = ptr
				o.responses[status] = map[string]bool{}
				o.headers[status] = map[string]bool{}
				headers, _ := res["headers"].(map[string]any)
				for h, p := range headers {
					header, _ := followRef(t, doc, p, "")
					o.headers[status][http.CanonicalHeaderKey(h)] = header["required"] == true
				}
				content, _ := res["content"].(map[string]any)
				for mt := range content {
					o.responses[status][mt] = true
				}
			}
			c.ops = append(c.ops, o)
		}
	}
	a.Client.Transport = c
	t.Cleanup(func() { // even when the session stopped half-way
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.problems {
			t.Error(p)
		}
	})
	return c
}

func (c *conformance) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *conformance) match(method, path string) *docOp {
	for _, o := range c.ops {
		if o.method == method && o.re.MatchString(path) {
			return o
		}
	}
	return nil
}

// schema compiles the schema at the document's JSON pointer ptr once.
func (c *conformance) schema(ptr string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.schemas[ptr]; ok {
		return s, nil
	}
	s, err := c.compiler.Compile("openapi.json#" + ptr)
	if err != nil {
		return nil, err
	}
	c.schemas[ptr] = s
	return s, nil
}

// followRef returns v, an object of doc at the JSON pointer ptr, or, when it is a $ref to another
// place of doc (#/components/responses/429), the object there and its pointer.
func followRef(t *testing.T, doc map[string]any, v any, ptr string) (map[string]any, string) {
	t.Helper()
	for range 8 {
		obj, ok := v.(map[string]any)
		require.True(t, ok, "%s is not an object", ptr)
		ref, ok := obj["$ref"].(string)
		if !ok {
			return obj, ptr
		}
		require.True(t, strings.HasPrefix(ref, "#/"), "%s: a $ref outside the document: %s", ptr, ref)
		ptr, v = strings.TrimPrefix(ref, "#"), any(doc)
		for _, token := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			m, _ := v.(map[string]any)
			v = m[strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")]
		}
		require.NotNil(t, v, "%s refers to nothing", ref)
	}
	require.FailNow(t, "a $ref chain too long", ptr)
	return nil, ""
}

func pointerToken(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
	return url.PathEscape(s)
}

func (c *conformance) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := c.base.RoundTrip(req)
	if err != nil || req.URL.Host != c.host || req.Method == http.MethodHead || req.Method == http.MethodOptions {
		return res, err
	}
	op := c.match(req.Method, req.URL.Path)
	if op == nil {
		return res, nil // not an operation of the document (the document itself, the docs UI)
	}
	raw, rerr := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(raw))
	if rerr != nil {
		c.fail("%s: reading the answer: %v", op.name(), rerr)
		return res, nil
	}
	c.mu.Lock()
	op.seen[res.StatusCode]++
	c.mu.Unlock()
	c.check(op, req, res, raw)
	return res, nil
}

func (c *conformance) check(op *docOp, req *http.Request, res *http.Response, raw []byte) {
	where := fmt.Sprintf("%s (%s %s)", op.name(), req.Method, req.URL.RequestURI())
	status := strconv.Itoa(res.StatusCode)
	content, ok := op.responses[status]
	if !ok {
		c.fail("%s answered %d, which the operation does not list: %.300s", where, res.StatusCode, raw)
		return
	}
	// The headers a client acts on: sent, they are documented; documented as required, they are sent.
	for _, h := range contractHeaders {
		if _, documented := op.headers[status][h]; res.Header.Get(h) != "" && !documented {
			c.fail("%s answered %d with %s: %q, which the document does not describe for it", where, res.StatusCode, h, res.Header.Get(h))
		}
	}
	for h, required := range op.headers[status] {
		if required && res.Header.Get(h) == "" {
			c.fail("%s answered %d without %s, which the document says is always sent", where, res.StatusCode, h)
		}
	}
	ct := res.Header.Get("Content-Type")
	if len(content) == 0 {
		if len(raw) > 0 {
			c.fail("%s answered %d with a body (%s) where the document describes none: %.200s", where, res.StatusCode, ct, raw)
		}
		return
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !content[mt] {
		c.fail("%s answered %d with Content-Type %q; documented: %v", where, res.StatusCode, ct, keys(content))
		return
	}
	if mt != "application/json" {
		return // text/plain metrics, text/event-stream: no JSON body to validate
	}
	s, err := c.schema(op.pointers[status] + "/content/" + pointerToken(mt) + "/schema")
	if err != nil {
		c.fail("%s %d: the documented schema does not compile: %v", where, res.StatusCode, err)
		return
	}
	body, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		c.fail("%s answered %d with a body that is not JSON: %.200s", where, res.StatusCode, raw)
		return
	}
	if err := s.Validate(body); err != nil {
		c.fail("%s answered %d with a body the documented schema refuses: %v\nbody: %.500s", where, res.StatusCode, err, raw)
	}
}

// contractHeaders are the response headers a generated client reads to act (retry later, sign in
// again, follow a redirect, slow down before a limit is reached), canonical: Retry-After,
// WWW-Authenticate, Location and the rate limits' X-RateLimit-*, RateLimit-Policy and RateLimit.
var contractHeaders = func() []string {
	out := []string{"Retry-After", "Www-Authenticate", "Location"}
	for _, h := range ratelimit.HeaderNames {
		out = append(out, http.CanonicalHeaderKey(h))
	}
	return out
}()

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// report fails the test with every operation that was not answered with both a success (unless
// noSuccess says why none can be had here) and a 4xx. Answers that did not match are reported
// when the test ends.
func (c *conformance) report(t *testing.T, noSuccess map[string]string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var untested []string
	for _, o := range c.ops {
		var ok, client bool
		for st := range o.seen {
			ok = ok || (st >= 200 && st < 400)
			client = client || (st >= 400 && st < 500)
		}
		if _, exempt := noSuccess[o.name()]; !ok && !exempt {
			untested = append(untested, o.name()+": no success answer")
		}
		if !client {
			untested = append(untested, o.name()+": no 4xx answer")
		}
	}
	sort.Strings(untested)
	assert.Empty(t, untested, "every documented operation is exercised (a new route needs a call in TestEveryAnswerMatchesTheOpenAPIDocument)")
}
