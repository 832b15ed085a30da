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

	"provisioner/platform/httpx"
	"provisioner/platform/testutil"
)

func TestOpenAPIDocumentDescribesRoutes(t *testing.T) {
	base := newServer(t)
	res, err := http.Get(base + "/api/openapi.json")
	require.NoError(t, err)
	defer res.Body.Close()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&doc))
	assert.Equal(t, "3.1.0", doc.OpenAPI)
	require.Contains(t, doc.Paths, "/api/widgets")
	assert.Contains(t, doc.Paths["/api/widgets"], "post")
	assert.NotContains(t, string(doc.Paths["/api/widgets"]["post"]), `"422"`, "validation is documented as 400")
	assert.Contains(t, string(doc.Paths["/api/widgets"]["post"]), `"400"`)
	assert.Contains(t, string(doc.Paths["/api/widgets"]["post"]), `"503"`, "a dependency that is down is documented")
}

// TestOpenAPIDocumentsEveryBadRequest: an operation whose parameters can fail validation documents
// the 400 it answers, not only POST/PUT/PATCH; one with a body also documents 415.
func TestOpenAPIDocumentsEveryBadRequest(t *testing.T) {
	base := newServer(t)
	raw := servedDocument(t, base)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]any `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	for _, c := range []struct{ method, path, query string }{
		{"get", "/api/widgets/{id}", "/api/widgets/0"},
		{"get", "/api/widgets", "/api/widgets?page=0"},
		{"post", "/api/widgets", ""},
	} {
		op := doc.Paths[c.path][c.method]
		require.Contains(t, op.Responses, "400", "%s %s", c.method, c.path)
		assert.Contains(t, op.Responses["400"].Content, "application/json")
		assert.NotContains(t, op.Responses, "422")
		if c.query != "" {
			res, _, raw := call(t, "GET", base+c.query, "", nil)
			assert.Equal(t, 400, res.StatusCode, "what the document says: %s", raw)
		}
	}
	assert.Contains(t, doc.Paths["/api/widgets"]["post"].Responses, "415")
}

// TestNoDataIsDocumentedAsNull: answers without data said `data` was a required object while
// they carried null.
func TestNoDataIsDocumentedAsNull(t *testing.T) {
	base := newServer(t)
	res, env, raw := call(t, "DELETE", base+"/api/widgets/1", "", nil)
	require.Equal(t, 200, res.StatusCode, raw)
	assert.Equal(t, "null", string(env.Data))
	served := servedDocument(t, base)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Required   []string `json:"required"`
				Properties map[string]struct {
					Type any `json:"type"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(served, &doc))
	ref := doc.Paths["/api/widgets/{id}"]["delete"].Responses["200"].Content["application/json"].Schema.Ref
	env200 := doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
	assert.Contains(t, env200.Required, "data", ref)
	assert.Equal(t, "null", env200.Properties["data"].Type, ref)
}

// TestOpenAPIListsWhatEachOperationAnswers: a DELETE given the same Responses map as a create
// listed the create's 201, 413 and 415; a POST without a body listed 413; each operation now lists
// its own 2xx, and 413/415 only where a body can come (POST, PUT, PATCH, declared or not).
func TestOpenAPIListsWhatEachOperationAnswers(t *testing.T) {
	base := newServer(t)
	res, err := http.Get(base + "/api/openapi.json")
	require.NoError(t, err)
	defer res.Body.Close()
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody any                 `json:"requestBody"`
			Responses   map[string]struct{} `json:"responses"`
		} `json:"paths"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&doc))
	twoHundreds := func(method, path string) []string {
		var out []string
		for code := range doc.Paths[path][method].Responses {
			if code[0] == '2' {
				out = append(out, code)
			}
		}
		return out
	}
	assert.Equal(t, []string{"201"}, twoHundreds("post", "/api/widgets"))
	assert.Equal(t, []string{"200"}, twoHundreds("delete", "/api/widgets/{id}"))
	assert.Contains(t, doc.Paths["/api/widgets/{id}"]["delete"].Responses, "502", "the shared response is kept")
	assert.Contains(t, doc.Paths["/api/widgets"]["post"].Responses, "502")
	for path, ops := range doc.Paths {
		for method, op := range ops {
			assert.NotContains(t, op.Responses, "405", "%s %s never answers 405 itself", method, path)
			// A body, declared or sent anyway, over BodyLimit is a 413, a compressed or non-UTF-8 one
			// a 415, and a URL with %00 a 400, before routing: every operation lists all three.
			for _, code := range []string{"400", "413", "415"} {
				assert.Contains(t, op.Responses, code, "%s %s", method, path)
			}
		}
	}
	assert.Contains(t, doc.Paths, "/api/widgets/{id}/pause")
	// What the document says of the pause: a 200, no body needed.
	res2, _, raw := call(t, "POST", base+"/api/widgets/3/pause", "", nil)
	assert.Equal(t, http.StatusOK, res2.StatusCode, raw)
	// And what it lists for a body sent anyway: a compressed one is a 415.
	res2, _, raw = call(t, "POST", base+"/api/widgets/3/pause", "not really gzip", map[string]string{"Content-Encoding": "gzip"})
	assert.Equal(t, http.StatusUnsupportedMediaType, res2.StatusCode, raw)
	// The same for the methods that take no body, which listed neither 400, 413 nor 415 though the
	// server answers each of them before routing.
	for _, method := range []string{"GET", "DELETE"} {
		res2, _, raw = call(t, method, base+"/api/widgets/3", "not really gzip", map[string]string{"Content-Encoding": "gzip"})
		assert.Equal(t, http.StatusUnsupportedMediaType, res2.StatusCode, "%s: %s", method, raw)
		res2, _, raw = call(t, method, base+"/api/widgets/3?x=%00", "", nil)
		assert.Equal(t, http.StatusBadRequest, res2.StatusCode, "%s: %s", method, raw)
		big := strings.Repeat(" ", httpx.BodyLimit+1)
		res2, _, raw = call(t, method, base+"/api/widgets/3", big, nil)
		assert.Equal(t, http.StatusRequestEntityTooLarge, res2.StatusCode, "%s: %s", method, raw)
	}
}

// TestLimitHeadersAreDeclaredOnEachResponse: ServerOptions.LimitHeaders are declared on every
// response of every operation, the hand-documented ones included, but the probes (which no limit
// counts): required on a success, optional on an error (some are answered before any limit),
// keeping what a response already declares (the 429's Retry-After). Without LimitHeaders nothing
// is declared (no limit sends them).
func TestLimitHeadersAreDeclaredOnEachResponse(t *testing.T) {
	limit := map[string]*huma.Param{"X-Limit": {Description: "hits", Schema: &huma.Schema{Type: "integer"}}}
	s, err := httpx.NewServer(httpx.ServerOptions{Title: "t", Version: "1", LimitHeaders: limit})
	require.NoError(t, err)
	routes{}.Register(s.API)
	httpx.Register(s.API, httpx.Public, huma.Operation{OperationID: "healthz", Method: http.MethodGet, Path: "/healthz"},
		func(context.Context, *struct{}) (*httpx.Response[widget], error) { return nil, nil })
	s.API.OpenAPI().AddOperation(&huma.Operation{OperationID: "byHand", Method: http.MethodPost, Path: "/api/by-hand",
		Responses: map[string]*huma.Response{"200": {Description: "OK"}}})
	s.Finish()
	doc := s.Document()

	for _, op := range []*huma.Operation{doc.Paths["/api/widgets"].Post, doc.Paths["/api/widgets/{id}"].Get, doc.Paths["/api/by-hand"].Post} {
		require.NotEmpty(t, op.Responses, op.OperationID)
		for code, r := range op.Responses {
			require.Contains(t, r.Headers, "X-Limit", "%s %s", op.OperationID, code)
			assert.Equal(t, code < "400", r.Headers["X-Limit"].Required, "%s %s: required on a success only", op.OperationID, code)
		}
	}
	assert.Contains(t, doc.Paths["/api/widgets"].Post.Responses["429"].Headers, "Retry-After", "kept")
	for code, r := range doc.Paths["/healthz"].Get.Responses {
		assert.NotContains(t, r.Headers, "X-Limit", "a probe's %s", code)
	}
	assert.False(t, limit["X-Limit"].Required, "the given Param is not changed")

	plain := buildServer(t, httpx.ServerOptions{})
	for code, r := range plain.Document().Paths["/api/widgets"].Post.Responses {
		assert.NotContains(t, r.Headers, "X-Limit", code)
	}
}

// servedDocument is the OpenAPI document the server at base serves, its shared responses,
// headers and parameters written out in each operation (testutil.InlineOpenAPI).
func servedDocument(t *testing.T, base string) []byte {
	t.Helper()
	res, err := http.Get(base + "/api/openapi.json")
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", raw)
	return testutil.InlineOpenAPI(t, raw)
}
