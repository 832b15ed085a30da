package httpx_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valyala/fasthttp"

	"provisioner/platform/httpx"
	"provisioner/platform/testutil"
)

// limitHeader is a rate-limit header as ratelimit.DocHeaders describes one.
var limitHeader = map[string]*huma.Param{"X-Limit": {Description: "Hits allowed per window.",
	Schema: &huma.Schema{Type: "integer"}}}

// documentServer serves the test routes and two operations answering 409, one in its own words,
// with a rate-limit header, and returns its address and the document it built (huma's, every
// part written out in each operation).
func documentServer(t *testing.T) (string, *huma.OpenAPI) {
	t.Helper()
	s, err := httpx.NewServer(httpx.ServerOptions{Title: "t", Version: "1", LimitHeaders: limitHeader})
	require.NoError(t, err)
	routes{}.Register(s.API)
	gadget := func(context.Context, *struct{}) (*httpx.Response[widget], error) { return nil, httpx.ErrConflict }
	httpx.Register(s.API, httpx.Public, huma.Operation{OperationID: "getGadget", Method: http.MethodGet, Path: "/api/gadget",
		Errors: []int{http.StatusConflict}}, gadget)
	httpx.Register(s.API, httpx.Public, huma.Operation{OperationID: "putGadget", Method: http.MethodPut, Path: "/api/gadget",
		Errors: []int{http.StatusConflict}, Responses: map[string]*huma.Response{"409": {Description: "The gadget is busy."}}}, gadget)
	s.Finish()
	require.NoError(t, s.Listen("127.0.0.1:0"))
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return "http://" + s.Addr(), s.Document()
}

// fetch sends a GET without Go's transparent gzip, so the answer is seen as sent.
func fetch(t *testing.T, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return res, body
}

type object = map[string]any

func decode(t *testing.T, raw []byte) object {
	t.Helper()
	var v object
	require.NoError(t, json.Unmarshal(raw, &v), "%.300s", raw)
	return v
}

func at(v any, path ...string) any {
	for _, p := range path {
		m, _ := v.(object)
		v = m[p]
	}
	return v
}

// TestServedDocumentSharesWhatOperationsRepeat: the rate-limit headers were written out on every
// response of every operation, and each operation repeated the same 400, 413, 415, 429, 500 and
// 503. The served document defines each once under components and refers to it; written back
// out, every operation answers what it answered before.
func TestServedDocumentSharesWhatOperationsRepeat(t *testing.T) {
	base, built := documentServer(t)
	res, raw := fetch(t, base+"/api/openapi.json", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	doc := decode(t, raw)
	full, err := json.Marshal(built)
	require.NoError(t, err)
	assert.Less(t, len(raw), len(full)/2, "the shared document is far smaller than huma's")

	paths := at(doc, "paths").(object)
	for _, p := range []string{"/api/widgets", "/api/widgets/{id}"} {
		for method, op := range paths[p].(object) {
			for _, code := range []string{"400", "413", "415", "429", "500", "503"} {
				assert.Equal(t, object{"$ref": "#/components/responses/" + code}, at(op, "responses", code), "%s %s %s", method, p, code)
			}
		}
	}
	// A required header is shared; an optional one is written in each response (a generator
	// takes a $ref'd header for one always sent).
	assert.Equal(t, true, at(doc, "components", "headers", "X-Limit", "required"))
	assert.Equal(t, "Hits allowed per window.", at(doc, "components", "headers", "X-Limit", "description"))
	assert.Equal(t, object{"$ref": "#/components/headers/X-Limit"}, at(paths, "/api/widgets", "post", "responses", "201", "headers", "X-Limit"))
	// A success alike on several operations is shared too, named after its body's schema.
	assert.Equal(t, object{"$ref": "#/components/responses/EnvelopeWidget"}, at(paths, "/api/widgets/{id}", "get", "responses", "200"))
	assert.Equal(t, object{"$ref": "#/components/headers/X-Limit"}, at(doc, "components", "responses", "EnvelopeWidget", "headers", "X-Limit"))
	assert.Equal(t, object{"schema": object{"type": "integer"}}, at(doc, "components", "responses", "429", "headers", "X-Limit"),
		"optional on an error, described once on the successes")
	// The 502 the two operations share is a component; its description is said there.
	assert.Equal(t, "The provider failed.", at(doc, "components", "responses", "502", "description"))
	assert.Equal(t, object{"$ref": "#/components/responses/502"}, at(paths, "/api/widgets", "post", "responses", "502"))
	// One answer worded two ways: the component says one, the other operation keeps its own.
	assert.Equal(t, "The gadget is busy.", at(doc, "components", "responses", "409", "description"))
	assert.Equal(t, object{"$ref": "#/components/responses/409", "description": "A duplicate, a quota reached, a state that does not allow the change, or the first request with the same `Idempotency-Key` still being answered."}, at(paths, "/api/gadget", "get", "responses", "409"))
	// Parameters alike on several operations (the widget id, the page) are shared too.
	assert.Equal(t, object{"$ref": "#/components/parameters/id"}, at(paths, "/api/widgets/{id}", "get", "parameters").([]any)[0])

	// Written back out, each operation answers what huma documented, and takes the same parameters.
	inlined := decode(t, testutil.InlineOpenAPI(t, raw))
	original := decode(t, full)
	for p, item := range at(original, "paths").(object) {
		for method := range item.(object) {
			op := []string{"paths", p, method}
			assert.Equal(t, at(original, append(op, "responses")...), at(inlined, append(op, "responses")...), "%s %s", method, p)
			params, _ := at(original, append(op, "parameters")...).([]any)
			for _, prm := range params {
				// The schema no longer repeats the parameter's description.
				if s, _ := prm.(object)["schema"].(object); s != nil && s["description"] == prm.(object)["description"] {
					delete(s, "description")
				}
			}
			assert.Equal(t, at(original, append(op, "parameters")...), at(inlined, append(op, "parameters")...), "%s %s", method, p)
		}
	}
}

// TestServedDocumentRevalidatesAndCompresses: the document was sent whole, uncompressed and
// Cache-Control: no-store on every visit of the docs page. It carries an ETag the page's next
// request names (304, no body), and is compressed when the client accepts it.
func TestServedDocumentRevalidatesAndCompresses(t *testing.T) {
	base, _ := documentServer(t)
	url := base + "/api/openapi.json"
	res, plain := fetch(t, url, nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "application/openapi+json", res.Header.Get("Content-Type"))
	assert.Empty(t, res.Header.Get("Content-Encoding"))
	assert.Equal(t, "no-cache", res.Header.Get("Cache-Control"), "kept, but revalidated before each use")
	assert.Contains(t, res.Header.Get("Vary"), "Accept-Encoding")
	etag := res.Header.Get("ETag")
	require.Regexp(t, `^"[A-Za-z0-9_-]+"$`, etag)
	decode(t, plain)

	res, zipped := fetch(t, url, map[string]string{"Accept-Encoding": "gzip, deflate"})
	assert.Equal(t, "gzip", res.Header.Get("Content-Encoding"))
	gzipTag := res.Header.Get("ETag")
	assert.NotEqual(t, etag, gzipTag, "one validator per content coding")
	unzipped, err := fasthttp.AppendGunzipBytes(nil, zipped)
	require.NoError(t, err)
	assert.Equal(t, plain, unzipped)
	assert.Less(t, len(zipped), len(plain)/4)

	res, brotli := fetch(t, url, map[string]string{"Accept-Encoding": "gzip, br"})
	assert.Equal(t, "br", res.Header.Get("Content-Encoding"))
	unbrotli, err := fasthttp.AppendUnbrotliBytes(nil, brotli)
	require.NoError(t, err)
	assert.Equal(t, plain, unbrotli)

	for accept, coding := range map[string]string{"br;q=0, gzip;q=0": "", "gzip, br;q=0.5": "gzip", "*": "br",
		"*;q=0, gzip": "gzip", "identity": "", "BR": "br"} {
		res, _ := fetch(t, url, map[string]string{"Accept-Encoding": accept})
		assert.Equal(t, coding, res.Header.Get("Content-Encoding"), "Accept-Encoding: %s", accept)
	}

	// Revalidation: any of the document's validators, weak or strong, in any coding; a list too.
	for _, c := range []struct{ ifNoneMatch, accept string }{
		{etag, ""}, {gzipTag, "gzip"}, {etag, "gzip"}, {"W/" + etag, ""}, {`"other", ` + gzipTag, "gzip"}, {"*", ""},
	} {
		res, body := fetch(t, url, map[string]string{"If-None-Match": c.ifNoneMatch, "Accept-Encoding": c.accept})
		assert.Equal(t, http.StatusNotModified, res.StatusCode, "If-None-Match: %s", c.ifNoneMatch)
		assert.Empty(t, body)
		assert.NotEmpty(t, res.Header.Get("ETag"))
		assert.Empty(t, res.Header.Get("Content-Encoding"))
	}
	res, body := fetch(t, url, map[string]string{"If-None-Match": `"stale"`})
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, plain, body)

	// The YAML rendering is the same shared document; the OpenAPI 3.0 ones are huma's.
	res, yaml := fetch(t, base+"/api/openapi.yaml", nil)
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "application/openapi+yaml", res.Header.Get("Content-Type"))
	assert.Contains(t, string(yaml), "#/components/responses/429")
	assert.NotEmpty(t, res.Header.Get("ETag"))
	res, downgraded := fetch(t, base+"/api/openapi-3.0.json", map[string]string{"Accept-Encoding": "gzip"})
	require.Equal(t, http.StatusOK, res.StatusCode)
	downgraded, err = fasthttp.AppendGunzipBytes(nil, downgraded)
	require.NoError(t, err)
	assert.Equal(t, "3.0.3", decode(t, downgraded)["openapi"])
	res, _ = fetch(t, base+"/api/openapi-3.0.yaml", nil)
	assert.Equal(t, http.StatusOK, res.StatusCode)

	req, err := http.NewRequest(http.MethodHead, url, nil)
	require.NoError(t, err)
	head, err := (&http.Client{Transport: &http.Transport{DisableCompression: true}}).Do(req)
	require.NoError(t, err)
	head.Body.Close()
	assert.Equal(t, http.StatusOK, head.StatusCode)
	assert.Equal(t, etag, head.Header.Get("ETag"))
	assert.True(t, strings.HasPrefix(head.Header.Get("Content-Type"), "application/openapi+json"))
}
