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

// TestANonASCIILetterIsNotFoldedIntoALabel: a label is [a-z0-9-] as given, upper case ASCII aside.
// Unicode lower-casing folded the Kelvin sign (U+212A) into an ASCII "k", so "\u212Aafka" was
// created as kafka: a name the client never sent. It is a 400 under label, like "ä".
func TestANonASCIILetterIsNotFoldedIntoALabel(t *testing.T) {
	a, fake := setup(t, nil)
	u := a.Register(t)
	for _, l := range []string{"\u212Aafka", "ab\u212A", "\u212A"} {
		r := a.Post("/api/me/dns", u.Token, map[string]any{"label": l})
		require.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", l, r.Raw)
		assert.Equal(t, []string{"label"}, r.Fields(), string(r.Raw))
	}
	assert.Zero(t, fake.Calls(), "nothing reaches the provider")
	r := a.Post("/api/me/dns", u.Token, map[string]any{"label": "KAFKA-" + label()})
	assert.Equal(t, http.StatusCreated, r.Status, "ASCII upper case is still lower-cased: %s", r.Raw)
}
