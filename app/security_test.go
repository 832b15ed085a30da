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

type operation struct {
	Method, Path string
	Security     []map[string][]string `json:"security"`
	Role         string                `json:"x-required-role"`
}

// routeTable reads every operation from the served OpenAPI document (which huma generates from
// the registered operations), so these matrices grow with every new route.
func routeTable(t *testing.T, a *apptest.App) []operation {
	t.Helper()
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	var doc struct {
		Paths map[string]map[string]operation `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(r.Raw, &doc))
	var ops []operation
	for path, byMethod := range doc.Paths {
		for method, op := range byMethod {
			op.Method, op.Path = strings.ToUpper(method), path
			ops = append(ops, op)
		}
	}
	return ops
}

func (o operation) scheme() string {
	for _, req := range o.Security {
		for name := range req {
			return name
		}
	}
	return ""
}

var pathParam = regexp.MustCompile(`\{[^}]+\}`)

func (o operation) concrete(id string) string { return pathParam.ReplaceAllString(o.Path, id) }

// leaks are things no response body may contain.
var leaks = regexp.MustCompile(`(?i)(goroutine \d|\.go:\d+|pq: |SQLSTATE|syntax error at|SELECT .* FROM|INSERT INTO|violates .* constraint|runtime error|password_hash|\$argon2id\$)`)

func TestEveryProtectedRouteRefusesMissingOrTamperedTokens(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	parts := strings.Split(u.Token, ".")
	tampered := parts[0] + "." + parts[1] + "x." + parts[2]
	checked := 0
	for _, op := range routeTable(t, a) {
		if op.scheme() != "bearerAuth" {
			continue
		}
		for name, tok := range map[string]string{"no token": "", "tampered token": tampered, "garbage": "x.y.z"} {
			t.Run(op.Method+" "+op.Path+" "+name, func(t *testing.T) {
				req := apptest.Request{Method: op.Method, Path: op.concrete("1"), Token: tok}
				if op.Method == http.MethodPost || op.Method == http.MethodPut {
					req.Body = map[string]any{}
				}
				r := a.Do(req)
				assert.Equal(t, http.StatusUnauthorized, r.Status, string(r.Raw))
				assert.False(t, r.Env.Success)
				// RFC 9110 §15.5.2 and RFC 6750 §3: a 401 names its scheme, and the error of a bad token.
				want := `Bearer error="invalid_token"`
				if tok == "" {
					want = "Bearer"
				}
				assert.Equal(t, want, r.Header.Get("WWW-Authenticate"))
			})
		}
		checked++
	}
	assert.Greater(t, checked, 5)
}

func TestEveryAPIKeyRouteRefusesMissingKeysAndJWTs(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	for _, op := range routeTable(t, a) {
		if op.scheme() != "apiKeyAuth" {
			continue
		}
		t.Run(op.Method+" "+op.Path, func(t *testing.T) {
			r := a.Do(apptest.Request{Method: op.Method, Path: op.concrete("1"), Body: map[string]any{"prompt": "hi"}})
			assert.Equal(t, http.StatusUnauthorized, r.Status, "no key")
			assert.Empty(t, r.Header.Get("WWW-Authenticate"), "as OpenAI: X-API-Key is no HTTP authentication scheme")
			r = a.Do(apptest.Request{Method: op.Method, Path: op.concrete("1"), Body: map[string]any{"prompt": "hi"},
				Header: map[string]string{"X-API-Key": u.Token}})
			assert.Equal(t, http.StatusUnauthorized, r.Status, "a JWT is not an API key")
		})
	}
}

// TestLoginRefusalSaysWhyItNamesNoChallenge: a wrong password is a 401 without WWW-Authenticate
// (the credentials travel in the body, no HTTP authentication scheme: a Bearer challenge would ask
// for a token sign-in does not take), and the OpenAPI document says so where it describes that
// 401, as it does for the X-API-Key operations, so a client is not left guessing at RFC 9110's
// challenge.
func TestLoginRefusalSaysWhyItNamesNoChallenge(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	r := a.Post("/api/auth/login", "", map[string]any{"email": u.Email, "password": "not-" + u.Password})
	require.Equal(t, http.StatusUnauthorized, r.Status, string(r.Raw))
	assert.Empty(t, r.Header.Get("WWW-Authenticate"))

	var doc struct {
		Info  struct{ Description string } `json:"info"`
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Description string `json:"description"`
			} `json:"responses"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(testutil.InlineOpenAPI(t, a.Get("/api/openapi.json", "").Raw), &doc))
	assert.Contains(t, doc.Paths["/api/auth/login"]["post"].Responses["401"].Description, "no `WWW-Authenticate`")
	assert.Contains(t, doc.Info.Description, "`POST /api/auth/login` send none")
}

// TestBadInputNeverAnswers500 sends malformed and hostile bodies to every route that takes one, as
// an admin (so the guard lets the request reach validation): a 4xx in the envelope, never a 500,
// and no internals in any body.
func TestBadInputNeverAnswers500(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)
	// Malformed bodies must be refused; hostile but well-formed ones may succeed (every field of
	// some PUTs is optional, and unknown fields such as "id" are ignored) but never with a 500.
	malformed := []string{`{`, `[]`, `"x"`, "\x00\xff"}
	bodies := append(append([]string{}, malformed...), `{"email": {"$gt": ""}}`, `{"id": "1; DROP TABLE users"}`, `{"name": "`+strings.Repeat("x", 5000)+`"}`)
	for _, op := range routeTable(t, a) {
		if op.Method != http.MethodPost && op.Method != http.MethodPut {
			continue
		}
		for i, b := range bodies {
			t.Run(fmt.Sprintf("%s %s #%d", op.Method, op.Path, i), func(t *testing.T) {
				token := admin
				if op.Path == "/api/auth/logout" { // ends its session: the admin's must serve the other routes
					token = a.AdminToken(t)
				}
				r := a.Do(apptest.Request{Method: op.Method, Path: op.concrete("1"), Token: token, Body: b,
					Header: map[string]string{"X-API-Key": "sk-invalid"}})
				assert.NotEqual(t, http.StatusInternalServerError, r.Status, string(r.Raw))
				assert.False(t, r.Status >= 500 && r.Env.Message == "", "a documented, enveloped answer")
				if i < len(malformed) {
					assert.GreaterOrEqual(t, r.Status, 400, string(r.Raw))
				}
				assert.NotRegexp(t, leaks, string(r.Raw))
			})
		}
	}
	for _, path := range []string{"/api/users/abc", "/api/users/-1", "/api/users/99999999999999999999", "/api/audit-events?from=%zz"} {
		r := a.Get(path, admin)
		assert.NotEqual(t, http.StatusInternalServerError, r.Status, path)
		assert.NotRegexp(t, leaks, string(r.Raw))
	}
}

// TestEveryMeRouteHidesOtherUsersResources is generated from the route table: every /api/me route
// with an id answers 404 for an id the caller does not own (another user's resource or none), never
// 403 and never 200. The modules' own tests do the same with real resources of another user.
func TestEveryMeRouteHidesOtherUsersResources(t *testing.T) {
	a := apptest.Start(t)
	u := a.Register(t)
	checked := 0
	for _, op := range routeTable(t, a) {
		if !strings.HasPrefix(op.Path, "/api/me/") || !strings.Contains(op.Path, "{") {
			continue
		}
		t.Run(op.Method+" "+op.Path, func(t *testing.T) {
			req := apptest.Request{Method: op.Method, Path: op.concrete("987654321"), Token: u.Token}
			if op.Method == http.MethodPost || op.Method == http.MethodPut || op.Method == http.MethodPatch {
				req.Body = map[string]any{}
			}
			r := a.Do(req)
			assert.Equal(t, http.StatusNotFound, r.Status, string(r.Raw))
		})
		checked++
	}
	assert.GreaterOrEqual(t, checked, 7)
}
