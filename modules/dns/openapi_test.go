package dns_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAdminCreateBodyIsDocumentedAndValidatedLikeTheUsers: the administrators' create body
// (POST /api/dns/records) documents the record's members (label, content, recordTtl, proxied)
// besides userId, and the same bad members get the same 400 as in the user's own create
// (POST /api/me/dns): a missing label "is required", a label of the wrong type is named "label".
func TestAdminCreateBodyIsDocumentedAndValidatedLikeTheUsers(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	admin := a.AdminToken(t)

	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Required   []string                   `json:"required"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(a.Get("/api/openapi.json", "").Raw, &doc))
	mine, theirs := doc.Components.Schemas["DnsRecordBody"], doc.Components.Schemas["DnsAdminCreateInputBody"]
	require.NotEmpty(t, mine.Properties)
	assert.ElementsMatch(t, append(slices.Collect(maps.Keys(mine.Properties)), "userId"), slices.Collect(maps.Keys(theirs.Properties)))
	for name, s := range mine.Properties {
		assert.JSONEq(t, string(s), string(theirs.Properties[name]), name)
	}
	assert.ElementsMatch(t, append(mine.Required, "userId"), theirs.Required)

	for _, body := range []map[string]any{
		{},
		{"label": 123},
		{"label": ""},
		{"label": "bad-"},
		{"label": "ok", "content": 5},
		{"label": "ok", "content": "127.0.0.1"},
		{"label": "ok", "recordTtl": "300"},
		{"label": "ok", "recordTtl": 30},
		{"label": "ok", "proxied": "yes"},
	} {
		t.Run(fmt.Sprint(body), func(t *testing.T) {
			own := a.Post("/api/me/dns", u.Token, body)
			require.Equal(t, http.StatusBadRequest, own.Status, string(own.Raw))
			withUser := maps.Clone(body)
			withUser["userId"] = u.ID
			r := a.Post("/api/dns/records", admin, withUser)
			require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
			assert.Equal(t, own.Env.Errors, r.Env.Errors, "%s\n%s", own.Raw, r.Raw)
		})
	}
	r := a.Post("/api/dns/records", admin, map[string]any{"label": "ok"})
	require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
	assert.Equal(t, []string{"userId"}, r.Fields())
	assert.Zero(t, fake.Calls(), "bad input never reaches the provider")
}
