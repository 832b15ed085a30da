package aikeys_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKeyNamesRefuseControlAndBidiCharacters: "x\u0001y" and "\u202egnp.exe" (shown as
// "exe.png") were accepted as key names (201).
func TestKeyNamesRefuseControlAndBidiCharacters(t *testing.T) {
	t.Parallel()
	a, _ := setup(t, nil)
	u := a.Register(t)
	for _, name := range []string{"x\u0001y", "\u202egnp.exe", "tab\there", "line\nbreak", "c1\u0085", "del\u007f", "iso\u2066late\u2069", "emb\u202aed"} {
		r := a.Post("/api/me/ai-keys", u.Token, map[string]any{"name": name})
		require.Equal(t, http.StatusBadRequest, r.Status, "%q: %s", name, r.Raw)
		assert.Equal(t, []string{"name"}, r.Fields(), "%q", name)
	}
	var ks []keyView
	a.Get("/api/me/ai-keys", u.Token).Decode(t, &ks)
	assert.Empty(t, ks, "nothing stored")
	newKey(t, a, u.Token, map[string]any{"name": "café – CI (prod) ✓ 日本"})
}
