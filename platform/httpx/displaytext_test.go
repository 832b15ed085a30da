package httpx_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"provisioner/platform/httpx"
)

// TestDisplayTextRefusesInvisibleFormatCharacters: names refused controls and bidi overrides but
// kept U+200B, U+2060, U+FEFF and the other format characters (Cf), so two names that look the
// same could differ. Joiners inside emoji sequences and non-Latin words stay allowed.
func TestDisplayTextRefusesInvisibleFormatCharacters(t *testing.T) {
	for _, s := range []string{"data\u200bbase", "word\u2060joiner", "\ufeffbom", "soft\u00adhyphen",
		"\u200dlead", "ab\u200dcd", "x\u200c", "tag\U000E0041"} {
		assert.Contains(t, httpx.DisplayTextProblem(s), "invisible format characters", "%q", s)
	}
	assert.Contains(t, httpx.DisplayTextProblem("a\u202eb"), "bidirectional")
	assert.Contains(t, httpx.DisplayTextProblem("a\nb"), "control")
	for _, s := range []string{"Production key", "clé ünïcode", "👩\u200d💻 dev", "می\u200cخواهم", "日本語"} {
		assert.Empty(t, httpx.DisplayTextProblem(s), "%q", s)
	}
}
