package httpx

import (
	"fmt"
	"unicode"
)

// Names users give things (an AI key's name, an audit note's action) are shown to other people, in
// lists, tables and logs. A control character (C0, DEL, C1: a line break, an escape sequence) can
// break the line or the terminal showing it, and a bidirectional override or isolate can reorder
// what is shown: "\u202Egnp.exe" reads as "exe.png". Both are refused in such names.

// Deceptive reports whether r is a control character (C0, DEL or C1) or a bidirectional override
// or isolate (U+202A–U+202E, U+2066–U+2069).
func Deceptive(r rune) bool {
	return unicode.IsControl(r) || isBidiControl(r)
}

func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// DisplayTextProblem returns what is wrong with a display name, for a validation error
// (httpx.Invalid(field, msg)), or "" when it holds no Deceptive character.
func DisplayTextProblem(s string) string {
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Sprintf("must not contain control characters (U+%04X)", r)
		case isBidiControl(r):
			return fmt.Sprintf("must not contain bidirectional override or isolate characters (U+%04X)", r)
		}
	}
	return ""
}
