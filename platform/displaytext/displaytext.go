// Package displaytext is the rule for names users give things (an AI key's name, an audit note's
// action, a person's name) that are shown to others: control characters, bidirectional overrides
// and isolates, and invisible format characters (category Cf) are refused in them, except the
// zero-width joiner and non-joiner right after a non-ASCII character (emoji sequences, Persian and
// Indic spellings).
package displaytext

import (
	"fmt"
	"unicode"
)

// Deceptive reports whether r is a control character (C0, DEL or C1), a bidirectional override
// or isolate (U+202A–U+202E, U+2066–U+2069), or another format character (category Cf).
func Deceptive(r rune) bool {
	return unicode.IsControl(r) || isBidiControl(r) || unicode.Is(unicode.Cf, r)
}

func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// Problem returns what is wrong with a display name, for a validation error, or "" when it holds
// no Deceptive character (but a joiner after a non-ASCII character).
func Problem(s string) string {
	prev := rune(0)
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Sprintf("must not contain control characters (U+%04X)", r)
		case isBidiControl(r):
			return fmt.Sprintf("must not contain bidirectional override or isolate characters (U+%04X)", r)
		case (r == 0x200C || r == 0x200D) && prev > unicode.MaxASCII && !unicode.Is(unicode.Cf, prev):
			// A joiner inside an emoji sequence or a non-Latin word.
		case unicode.Is(unicode.Cf, r):
			return fmt.Sprintf("must not contain invisible format characters (U+%04X)", r)
		}
		prev = r
	}
	return ""
}
