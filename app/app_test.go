package app_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app"
	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// TestWiring proves the fx graph (every module's providers and value groups) without starting it.
func TestWiring(t *testing.T) {
	require.NoError(t, fx.ValidateApp(app.Options(apptest.TestConfig(t))...))
}

// TestOpenAPIDocument checks the document the running service serves, and writes it to
// $OPENAPI_OUT when set (scripts/openapi-lint.sh lints that file with Spectral, and
// scripts/openapi-types.sh compares the TypeScript types generated from it with golden ones).
func TestOpenAPIDocument(t *testing.T) {
	a := apptest.Start(t)
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	var doc struct {
		OpenAPI    string                               `json:"openapi"`
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			SecuritySchemes map[string]any `json:"securitySchemes"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(r.Raw, &doc))
	assert.Equal(t, "3.1.0", doc.OpenAPI)
	assert.Contains(t, doc.Components.SecuritySchemes, "bearerAuth")
	assert.Contains(t, doc.Components.SecuritySchemes, "apiKeyAuth")
	var idempotentOps []string
	for path, ops := range doc.Paths {
		for method, op := range ops {
			assert.NotEmpty(t, op["operationId"], "%s %s has an operationId", method, path)
			assert.NotEmpty(t, op["summary"], "%s %s has a summary", method, path)
			responses, _ := op["responses"].(map[string]any)
			params, _ := json.Marshal(op["parameters"])
			idempotent := strings.Contains(string(params), `"#/components/parameters/Idempotency-Key"`)
			if r, ok := responses["422"].(map[string]any); ok && !idempotent {
				// Only the AI pass-through (the upstream's, relayed) and the operations taking an
				// Idempotency-Key (a key used with another request) answer 422; validation is 400.
				assert.Equal(t, "/api/ai/v1/chat/completions", path, "%s %s: validation is documented as 400: %v", method, path, r)
			}
			if idempotent {
				assert.Equal(t, map[string]any{"$ref": "#/components/responses/422"}, responses["422"], "%s %s", method, path)
				assert.Contains(t, responses, "409", "%s %s", method, path)
				idempotentOps = append(idempotentOps, op["operationId"].(string))
			}
			// What each operation answers: 405 is the answer to another method on the path (the
			// API description says so); 400 (a NUL in the URL), 413 and 415 (a body, even one sent
			// anyway) are refused before routing, on every operation; and one success, a 2xx or the
			// OAuth redirects' 302 (a DELETE sharing a create's responses listed its 201).
			assert.NotContains(t, responses, "405", "%s %s", method, path)
			for _, code := range []string{"400", "413", "415"} {
				assert.Contains(t, responses, code, "%s %s", method, path)
			}
			var ok []string
			for code := range responses {
				if strings.HasPrefix(code, "2") || strings.HasPrefix(code, "3") {
					ok = append(ok, code)
				}
			}
			assert.Len(t, ok, 1, "%s %s lists one success: %v", method, path, ok)
		}
	}
	// Every POST that creates or changes a resource takes an Idempotency-Key (register excepted).
	assert.ElementsMatch(t, []string{"createMyDatabase", "pauseMyDatabase", "resumeMyDatabase", "createDatabaseInstance",
		"restoreMyDatabase", "restoreDatabaseInstance",
		"createAccessCredential", "rotateAccessCredential", "createMyDnsRecord", "createDnsRecord", "retryDnsRecord",
		"provisionMyWfautoAccount", "provisionWfautoAccount", "retryWfautoAccount", "createMyAiKey", "rotateMyAiKey", "rotateMyDatabasePassword"}, idempotentOps)
	assert.Contains(t, doc.Paths["/api/ai/v1/chat/completions"]["post"]["responses"], "422",
		"the pass-through relays the upstream's 422 and says so")
	// What the docs page downloads on each visit: shared parts written once (components), and
	// operations that say only what is particular to them. The budget is per operation (2,000
	// bytes, a 150 KB document for 75 operations) so that adding a module costs its operations'
	// share, not a cut in everyone else's documentation.
	ops := 0
	for _, methods := range doc.Paths {
		ops += len(methods)
	}
	assert.LessOrEqual(t, len(r.Raw), 2_000*ops, "the document is %d bytes for %d operations (%d per operation, budget 2,000): write what operations "+
		"repeat once (httpx.shareComponents shares identical responses, headers and parameters) and keep prose to what is particular",
		len(r.Raw), ops, len(r.Raw)/max(ops, 1))
	require.NotEmpty(t, r.Header.Get("ETag"))
	again := a.Do(apptest.Request{Method: http.MethodGet, Path: "/api/openapi.json", Header: map[string]string{"If-None-Match": r.Header.Get("ETag")}})
	assert.Equal(t, http.StatusNotModified, again.Status)
	if out := os.Getenv("OPENAPI_OUT"); out != "" {
		require.NoError(t, os.MkdirAll(filepath.Dir(out), 0o755))
		require.NoError(t, os.WriteFile(out, r.Raw, 0o644))
	}
}
