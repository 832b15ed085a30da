package dns_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEmptyContentWithADefaultSaysSo: a content given empty (or blank) is a 400 under content; with
// Dns:DefaultContent configured, the message must not claim that none is (it said "is required
// (no Dns:DefaultContent is configured)"): it tells the client to omit the field for the default.
func TestEmptyContentWithADefaultSaysSo(t *testing.T) {
	a, fake := setup(t, nil) // Dns:DefaultContent 203.0.113.10
	u := a.Register(t)
	for _, c := range []string{"", "   "} {
		r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label(), "content": c})
		require.Equal(t, http.StatusBadRequest, r.Status, string(r.Raw))
		require.Equal(t, []string{"content"}, r.Fields(), string(r.Raw))
		assert.NotContains(t, string(r.Raw), "no Dns:DefaultContent is configured", "a default is configured")
		assert.Contains(t, string(r.Raw), "omit it", string(r.Raw))
	}
	assert.Zero(t, fake.Calls())

	// Omitted, the default applies.
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": label()})
	require.Equal(t, http.StatusCreated, r.Status, string(r.Raw))
}
