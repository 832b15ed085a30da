package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// bodyProperty answers the served document's schema of a request body member.
func bodyProperty(t *testing.T, doc map[string]any, method, path, field string) map[string]any {
	t.Helper()
	op, _ := doc["paths"].(map[string]any)[path].(map[string]any)[strings.ToLower(method)].(map[string]any)
	require.NotNil(t, op, "%s %s documented", method, path)
	ref, _ := op["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)["$ref"].(string)
	name := strings.TrimPrefix(ref, "#/components/schemas/")
	s, _ := doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any)
	require.NotNil(t, s, "%s %s: body schema %q", method, path, ref)
	p, _ := s["properties"].(map[string]any)[field].(map[string]any)
	require.NotNil(t, p, "%s %s: %s documented", method, path, field)
	return p
}

// TestDocumentedConstraintsAreWhatTheServerEnforces: the document let through values the server
// refuses (an audit event's action outside plain dotted ASCII, a fullName or an AI key's name of
// white space only or holding NUL, rotatePassword false). The schema now carries the pattern or
// enum; a value the documented pattern refuses is exactly one the route refuses, and the 400 names
// the field with the server's own words.
func TestDocumentedConstraintsAreWhatTheServerEnforces(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	u := a.Register(t)
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(r.Raw, &doc))

	n := 0
	unique := func() string { n++; return fmt.Sprintf("c%d-%s@example.test", n, testutil.RandomSuffix()) }
	type route struct {
		method, path, field string
		send                func(v string) *apptest.Resp
	}
	names := []string{"Ada", " Ada ", "   ", "\t\n", "\u00a0\u3000", "\u2003", "A\x00B", "\x00", "Ada\u00a0Lovelace"}
	routes := []route{
		{"POST", "/api/auth/register", "fullName", func(v string) *apptest.Resp {
			return a.Post("/api/auth/register", "", map[string]any{"fullName": v, "email": unique(), "password": "Tr0ub4dor&3-" + testutil.RandomSuffix()})
		}},
		{"POST", "/api/users", "fullName", func(v string) *apptest.Resp {
			return a.Post("/api/users", admin, map[string]any{"fullName": v, "email": unique(), "password": "Tr0ub4dor&3-" + testutil.RandomSuffix()})
		}},
		{"PUT", "/api/users/{id}", "fullName", func(v string) *apptest.Resp {
			return a.Do(apptest.Request{Method: "PUT", Path: fmt.Sprintf("/api/users/%d", u.ID), Token: admin, Body: map[string]any{"fullName": v}})
		}},
		{"POST", "/api/me/ai-keys", "name", func(v string) *apptest.Resp {
			r := a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": v})
			if r.Status == http.StatusCreated { // at most two live keys: make room
				var k struct{ ID int64 }
				r.Decode(t, &k)
				a.Do(apptest.Request{Method: "DELETE", Path: fmt.Sprintf("/api/me/ai-keys/%d", k.ID), Token: u.Token})
			}
			return r
		}},
		{"POST", "/api/audit-events", "action", func(v string) *apptest.Resp {
			return a.Post("/api/audit-events", admin, map[string]any{"action": v})
		}},
	}
	actions := []string{"note.manual", "note", "a-b_c.d2", "note..x", ".note", "note.", "note manual", "nоte", "note/x", "note.\u200b"}
	for _, rt := range routes {
		p := bodyProperty(t, doc, rt.method, rt.path, rt.field)
		pattern, _ := p["pattern"].(string)
		require.NotEmpty(t, pattern, "%s %s %s: a pattern", rt.method, rt.path, rt.field)
		re := regexp.MustCompile(pattern)
		values := names
		if rt.field == "action" {
			values = actions
		}
		for _, v := range values {
			res := rt.send(v)
			refused := res.Status == http.StatusBadRequest && assert.Contains(t, res.Fields(), rt.field, "%s %q: %s", rt.path, v, res.Raw)
			if !refused {
				assert.Less(t, res.Status, 300, "%s %q accepted: %s", rt.path, v, res.Raw)
			}
			assert.Equal(t, !re.MatchString(v), refused, "%s %s %q: the document's pattern refuses it exactly when the route does (%d %s)", rt.method, rt.path, v, res.Status, res.Raw)
			if refused {
				for _, e := range res.Env.Errors {
					if e.Field == rt.field {
						assert.True(t, strings.HasPrefix(e.Message, "must "), "%s %q: the server's own words, not the schema's: %q", rt.path, v, e.Message)
						assert.NotContains(t, e.Message, "pattern")
					}
				}
			}
		}
	}
	// The server's precise messages are kept.
	res := a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "   "})
	require.Equal(t, http.StatusBadRequest, res.Status)
	assert.Equal(t, "must not be blank", res.Env.Errors[0].Message, string(res.Raw))
	res = a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "a\x01b"})
	require.Equal(t, http.StatusBadRequest, res.Status)
	assert.Equal(t, "must not contain control characters (U+0001)", res.Env.Errors[0].Message, string(res.Raw))
	res = a.Post("/api/audit-events", admin, map[string]any{"action": "note..x"})
	require.Equal(t, http.StatusBadRequest, res.Status)
	assert.Equal(t, "must be plain ASCII: words of letters, digits, _ and - joined by single dots, e.g. note.manual", res.Env.Errors[0].Message, string(res.Raw))

	// rotatePassword: only true is accepted, and the document says so.
	p := bodyProperty(t, doc, "PUT", "/api/access-credentials/{id}", "rotatePassword")
	assert.Equal(t, []any{true}, p["enum"], "rotatePassword is documented as true only")
	res = a.Do(apptest.Request{Method: "PUT", Path: "/api/access-credentials/999999", Token: admin, Body: map[string]any{"rotatePassword": false}})
	require.Equal(t, http.StatusBadRequest, res.Status, string(res.Raw))
	require.Len(t, res.Env.Errors, 1, string(res.Raw))
	assert.Equal(t, "rotatePassword", res.Env.Errors[0].Field)
	assert.Equal(t, "must be true", res.Env.Errors[0].Message)
	res = a.Do(apptest.Request{Method: "PUT", Path: "/api/access-credentials/999999", Token: admin, Body: map[string]any{"rotatePassword": true}})
	assert.Equal(t, http.StatusNotFound, res.Status, "true passes the schema: %s", res.Raw)
}
