package emailaddr_test

import (
	"net/mail"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/emailaddr"
)

func TestNormalizeAcceptsBareAddresses(t *testing.T) {
	for in, want := range map[string]string{
		"ada@example.com":              "ada@example.com",
		"  Ada.Lovelace@Example.COM  ": "ada.lovelace@example.com",
		"a+tag@sub.example.co.uk":      "a+tag@sub.example.co.uk",
		"o'brien@example.ie":           "o'brien@example.ie",
		"admin@provisioner.test":       "admin@provisioner.test",
		"x@localhost":                  "x@localhost",
		"jürgen@bücher.example":        "jürgen@bücher.example",
		// One mailbox, one spelling: the local part in NFC, the domain in its Unicode form.
		"nu\u0308@probe.test":     "n\u00fc@probe.test",
		"n\u00fc@probe.test":      "n\u00fc@probe.test",
		"\u0130@probe.test":       "i@probe.test",
		"I\u0307@probe.test":      "i@probe.test",
		"x@xn--bcher-kva.example": "x@bücher.example",
		"x@XN--BCHER-KVA.example": "x@bücher.example",
		"x@BÜCHER.example":        "x@bücher.example",
		"x@bu\u0308cher.example":  "x@bücher.example",
		"x@ｅｘａｍｐｌｅ.com":           "x@example.com",
		"x@straße.example":        "x@straße.example",
		"x@r3---sn-ab.example":    "x@r3---sn-ab.example",
	} {
		got, err := emailaddr.Normalize(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
}

// Every form net/mail.ParseAddress (and so huma's format:"email") accepts besides a bare address is
// refused: stored as typed it would dodge the uniqueness of the address it contains.
func TestNormalizeRefusesAnythingButABareAddress(t *testing.T) {
	for _, in := range []string{
		"Eve <ada@example.com>",
		"<ada@example.com>",
		`"Eve" <ada@example.com>`,
		"ada@example.com (Eve)",
		"(Eve) ada@example.com",
		`"ada"@example.com`,
		`"a\u0000"@example.com`,
		`"a b"@example.com`,
		"=?utf-8?q?Eve?= <ada@example.com>",
		"ada@[127.0.0.1]",
		"ada@example.com, eve@example.com",
		"ada @example.com",
		"ada@exa mple.com",
		"ada@example..com",
		"ada@.example.com",
		"ada@example.com.",
		"ada@-example.com",
		"ada@exa_mple.com",
		"ada@example.com\r\nBcc: eve@example.com",
		"ada\x00@example.com",
		".ada@example.com",
		"ada.@example.com",
		"ada",
		"@example.com",
		"ada@",
		"",
		"   ",
		strings.Repeat("a", 65) + "@example.com",
		"a@" + strings.Repeat("b", 64) + ".com",
		"a@" + strings.Repeat("b.", 130) + "com",
		"\xff@example.com",
		"x@xn--zz.example",                           // not punycode
		"x@xn--bcher-kva-.example",                   // a hyphen at the end
		"x@ex\u2764ample.com",                        // a symbol IDNA disallows
		"x@" + strings.Repeat("a", 60) + "ü.example", // its ASCII label is over 63 bytes
	} {
		_, err := emailaddr.Normalize(in)
		assert.ErrorIs(t, err, emailaddr.ErrInvalid, "%q", in)
		assert.False(t, emailaddr.Valid(in), "%q", in)
	}
	// The display-name form is exactly what ParseAddress lets through.
	a, err := mail.ParseAddress("Eve <ada@example.com>")
	require.NoError(t, err)
	assert.Equal(t, "ada@example.com", a.Address)
}

// FuzzNormalize: an accepted address is already normal (idempotent), is what ParseAddress reads
// as the whole address, and never carries a display name.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"ada@example.com", "Eve <ada@example.com>", `"a\u0000"@example.com`,
		"ada@example.com (Eve)", "A@B.C", "ada@[127.0.0.1]", "jürgen@bücher.example", "", "nu\u0308@xn--bcher-kva.example"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := emailaddr.Normalize(s)
		if err != nil {
			return
		}
		again, err := emailaddr.Normalize(got)
		if err != nil || again != got {
			t.Fatalf("Normalize(%q) = %q, not stable: %q, %v", s, got, again, err)
		}
		a, err := mail.ParseAddress(got)
		if err != nil || a.Name != "" || !strings.EqualFold(a.Address, got) {
			t.Fatalf("Normalize(%q) = %q, which ParseAddress reads as %+v, %v", s, got, a, err)
		}
		if len(got) > emailaddr.MaxLen || strings.ContainsAny(got, " <>\"()\r\n\x00") {
			t.Fatalf("Normalize(%q) = %q", s, got)
		}
	})
}
