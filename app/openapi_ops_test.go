package app_test

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// servedDoc is the served OpenAPI document with its schemas in a registry huma validates against.
type servedDoc struct {
	Paths map[string]map[string]struct {
		Security  []map[string][]string `json:"security"`
		Responses map[string]struct {
			Content map[string]struct {
				Schema struct {
					Ref string `json:"$ref"`
				} `json:"schema"`
			} `json:"content"`
		} `json:"responses"`
	} `json:"paths"`
	Components struct {
		Schemas map[string]json.RawMessage `json:"schemas"`
	} `json:"components"`
}

func loadServedDoc(t *testing.T, a *apptest.App) (servedDoc, huma.Registry) {
	t.Helper()
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	var doc servedDoc
	require.NoError(t, json.Unmarshal(testutil.InlineOpenAPI(t, r.Raw), &doc))
	reg := huma.NewMapRegistry("#/components/schemas/", huma.DefaultSchemaNamer)
	for name, raw := range doc.Components.Schemas {
		// huma.Schema reads what these operations use; a nullable field's type list (OpenAPI 3.1)
		// it does not, so schemas with one are left out (a reference to one would fail the test).
		// huma.Schema has no JSON tags (only a MarshalJSON): "$ref" is read as "ref".
		raw = bytes.ReplaceAll(raw, []byte(`"$ref":`), []byte(`"ref":`))
		s := new(huma.Schema)
		if json.Unmarshal(raw, s) != nil {
			continue
		}
		s.PrecomputeMessages()
		reg.Map()[name] = s
	}
	return doc, reg
}

// validAgainst lists what in body does not match the documented schema ref (nil when it matches).
func validAgainst(t *testing.T, reg huma.Registry, ref string, body []byte) []error {
	t.Helper()
	require.NotNil(t, reg.SchemaFromRef(ref), ref)
	s := &huma.Schema{Ref: ref}
	var v any
	require.NoError(t, json.Unmarshal(body, &v))
	res := &huma.ValidateResult{}
	huma.Validate(reg, s, huma.NewPathBuffer([]byte{}, 0), huma.ModeReadFromServer, v, res)
	return res.Errors
}

// TestOpenAPIDocumentsTheOperationalEndpoints: /metrics is in the document (public, Prometheus
// text), and what /readyz and /healthz answer matches their documented schema, whose checks name
// the database and Redis and their values.
func TestOpenAPIDocumentsTheOperationalEndpoints(t *testing.T) {
	a := apptest.Start(t)
	doc, reg := loadServedDoc(t, a)

	metrics, ok := doc.Paths["/metrics"]["get"]
	require.True(t, ok, "GET /metrics is documented")
	assert.Empty(t, metrics.Security, "public")
	require.Contains(t, metrics.Responses["200"].Content, "text/plain")
	res, err := http.Get(a.URL + "/metrics")
	require.NoError(t, err)
	res.Body.Close()
	mt, params, err := mime.ParseMediaType(res.Header.Get("Content-Type"))
	require.NoError(t, err)
	assert.Equal(t, "text/plain", mt, "the documented media type")
	assert.Equal(t, "0.0.4", params["version"], "the Prometheus text format the description names")

	for _, path := range []string{"/readyz", "/healthz"} {
		r := a.Get(path, "")
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		s := doc.Paths[path]["get"].Responses["200"].Content["application/json"].Schema.Ref
		assert.Empty(t, validAgainst(t, reg, s, r.Raw), "%s answers what it documents: %s", path, r.Raw)
		assert.NotContains(t, doc.Paths[path]["get"].Responses, "429", "no rate limit counts %s", path)
	}
	assert.Contains(t, doc.Paths["/api/engines"]["get"].Responses, "429", "the per-IP limit counts the other routes")
	assert.Contains(t, string(a.Get("/readyz", "").Raw), `"checks":{"database":"ok","redis":"ok"}`)

	// The schema is strict enough to tell: an answer with another check value does not match.
	s := doc.Paths["/readyz"]["get"].Responses["200"].Content["application/json"].Schema.Ref
	bad := strings.Replace(string(a.Get("/readyz", "").Raw), `"database":"ok"`, `"database":"up"`, 1)
	assert.NotEmpty(t, validAgainst(t, reg, s, []byte(bad)), "database is documented as ok or down")
	bad = strings.Replace(string(a.Get("/readyz", "").Raw), `"redis":"ok"`, `"redis":"ok","cache":"ok"`, 1)
	assert.NotEmpty(t, validAgainst(t, reg, s, []byte(bad)), "checks lists database and redis only")
}
