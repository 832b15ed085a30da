package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

// TestCaseVariantMembersCannotBypassValidation: huma validates a body as a map and then decodes the
// struct; with encoding/json the struct took a case variant of a member ("PASSWORD") or the last of
// duplicates, which validation never saw. On real routes: a one-character password was stored, a
// 31-year grace period was granted, a "SuperUser" role reached the database (500).
func TestCaseVariantMembersCannotBypassValidation(t *testing.T) {
	a := apptest.Start(t)
	admin := a.AdminToken(t)

	t.Run("register", func(t *testing.T) {
		email := fmt.Sprintf("case-%s@example.test", testutil.RandomSuffix())
		r := a.Post("/api/auth/register", "", fmt.Sprintf(
			`{"fullName":"Case","organization":"Tests","email":%q,"password":"long enough pass 1","PASSWORD":"x"}`, email))
		require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
		r = a.Post("/api/auth/login", "", map[string]any{"email": email, "password": "x"})
		assert.Equal(t, http.StatusUnauthorized, r.Status, "the unvalidated member was not stored")
		r = a.Post("/api/auth/login", "", map[string]any{"email": email, "password": "long enough pass 1"})
		assert.Equal(t, http.StatusOK, r.Status, "the validated member was")

		r = a.Post("/api/auth/register", "", fmt.Sprintf(
			`{"fullName":"Case","organization":"Tests","email":%q,"PASSWORD":"long enough pass 1"}`, "only-"+email))
		assert.Equal(t, http.StatusBadRequest, r.Status, "a case variant is not the required member: %s", r.Raw)
		assert.Equal(t, []string{"password"}, r.Fields())

		dup := fmt.Sprintf("dup-%s@example.test", testutil.RandomSuffix())
		r = a.Post("/api/auth/register", "", fmt.Sprintf(
			`{"fullName":"Dup","organization":"Tests","email":%q,"password":"long enough pass 1","password":"x"}`, dup))
		assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
		assert.Contains(t, string(r.Raw), "duplicate member")
		var n int
		require.NoError(t, a.DB.QueryRow("SELECT count(*) FROM users WHERE email = ?", dup).Scan(&n))
		assert.Zero(t, n, "nothing was written")
	})

	t.Run("ai key grace period", func(t *testing.T) {
		u := a.Register(t)
		r := a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": "case"})
		require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
		var k struct {
			ID int64 `json:"id"`
		}
		r.Decode(t, &k)
		r = a.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID), u.Token, `{"GracePeriodSeconds":999999999}`)
		require.Equal(t, http.StatusOK, r.Status, string(r.Raw))
		var grace *string
		require.NoError(t, a.DB.QueryRow("SELECT previous_valid_until::text FROM ai_keys WHERE id = ?", k.ID).Scan(&grace))
		assert.Nil(t, grace, "no grace period was granted")
		r = a.Post(fmt.Sprintf("/api/me/ai-keys/%d/rotate", k.ID), u.Token, `{"gracePeriodSeconds":60,"gracePeriodSeconds":999999999}`)
		assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	})

	t.Run("admin role", func(t *testing.T) {
		u := a.Register(t)
		path := fmt.Sprintf("/api/users/%d", u.ID)
		r := a.Do(apptest.Request{Method: "PUT", Path: path, Token: admin, Body: `{"role":"User","Role":"SuperUser"}`})
		require.Less(t, r.Status, 500, string(r.Raw))
		var role string
		require.NoError(t, a.DB.QueryRow("SELECT role FROM users WHERE id = ?", u.ID).Scan(&role))
		assert.Equal(t, "User", role)
		r = a.Do(apptest.Request{Method: "PUT", Path: path, Token: admin, Body: `{"role":"SuperUser"}`})
		assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	})

	t.Run("NUL", func(t *testing.T) {
		u := a.Register(t)
		r := a.Post("/api/me/ai-keys", u.Token, `{"name":"a\u0000b"}`)
		assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
		assert.Contains(t, string(r.Raw), "NUL")
		r = a.Get("/api/users?search=a%00b", admin)
		assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
		assert.Equal(t, "The URL must not contain NUL characters (%00)", r.Env.Message)
	})

	t.Run("page", func(t *testing.T) {
		r := a.Get("/api/users?page=9223372036854775807", admin)
		assert.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
		assert.Equal(t, []string{"page"}, r.Fields())
	})

	t.Run("content type", func(t *testing.T) {
		r := a.Do(apptest.Request{Method: "POST", Path: "/api/auth/login", Body: `{"email":"a@b.co","password":"x"}`,
			Header: map[string]string{"Content-Type": "text/plain"}})
		assert.Equal(t, http.StatusUnsupportedMediaType, r.Status, string(r.Raw))
		assert.Equal(t, "Unsupported Content-Type: send application/json", r.Env.Message)
	})
}

// TestEveryInvalidFieldIsListed: a field failing a check the schema cannot express (a common
// password) is listed in the same answer as the fields failing the schema.
func TestEveryInvalidFieldIsListed(t *testing.T) {
	a := apptest.Start(t)
	r := a.Post("/api/auth/register", "", map[string]any{"fullName": "", "organization": "T",
		"email": "not-an-email", "password": "password"})
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.ElementsMatch(t, []string{"fullName", "email", "password"}, r.Fields(), string(r.Raw))

	admin := a.AdminToken(t)
	r = a.Post("/api/users", admin, map[string]any{"fullName": "", "email": "x@example.test", "password": "password"})
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.ElementsMatch(t, []string{"fullName", "password"}, r.Fields(), string(r.Raw))
}

// TestOpenAPIDocumentsEveryValidationError: every operation whose parameters or body huma
// validates documents the 400 it answers (GETs with an id path or ?page were missing it).
func TestOpenAPIDocumentsEveryValidationError(t *testing.T) {
	a := apptest.Start(t)
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				In       string         `json:"in"`
				Required bool           `json:"required"`
				Schema   map[string]any `json:"schema"`
			} `json:"parameters"`
			RequestBody any            `json:"requestBody"`
			Responses   map[string]any `json:"responses"`
		} `json:"paths"`
	}
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	require.NoError(t, json.Unmarshal(testutil.InlineOpenAPI(t, r.Raw), &doc))
	checked := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			validated := op.RequestBody != nil
			for _, p := range op.Parameters {
				if p.Schema["type"] != "string" || (p.Required && p.In != "path") || p.Schema["enum"] != nil || p.Schema["pattern"] != nil {
					validated = true
				}
			}
			if validated {
				checked++
				assert.Contains(t, op.Responses, "400", "%s %s", strings.ToUpper(method), path)
			}
		}
	}
	assert.Greater(t, checked, 20)
	r = a.Get("/api/users/0", a.AdminToken(t))
	assert.Equal(t, http.StatusBadRequest, r.Status, "GET /api/users/{id} answers the 400 it documents")
}
