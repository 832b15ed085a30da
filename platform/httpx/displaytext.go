package httpx

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/danielgtaylor/huma/v2"
)

// Names users give things (an AI key's name, an audit note's action) are shown to others, so
// control characters, bidirectional overrides and isolates, and invisible format characters
// (category Cf) are refused in them, except the zero-width joiner and non-joiner right after a
// non-ASCII character (emoji sequences, Persian and Indic spellings).

// Deceptive reports whether r is a control character (C0, DEL or C1), a bidirectional override
// or isolate (U+202A–U+202E, U+2066–U+2069), or another format character (category Cf).
func Deceptive(r rune) bool {
	return unicode.IsControl(r) || isBidiControl(r) || unicode.Is(unicode.Cf, r)
}

func isBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// DisplayTextProblem returns what is wrong with a display name, for a validation error
// (httpx.Invalid(field, msg)), or "" when it holds no Deceptive character (but a joiner after a
// non-ASCII character).
func DisplayTextProblem(s string) string {
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

// PersonTexts checks a user's fullName and organization as given in a request (nil: not sent),
// for register and the admin's user routes alike: a fullName of white space only is refused
// (stored trimmed, it would be the empty name minLength refuses, which reports the empty one), and
// so is either text holding a character DisplayTextProblem refuses: both are shown to other
// people (admin lists, the dashboard, the JWT's name claim), where "\u202eevil" or an escape
// sequence would mislead.
func PersonTexts(fullName, organization *string) []error {
	var errs []error
	if fullName != nil && *fullName != "" && strings.TrimSpace(*fullName) == "" {
		errs = append(errs, Invalid("fullName", "must not be blank (white space only)"))
	} else if fullName != nil {
		if msg := DisplayTextProblem(*fullName); msg != "" {
			errs = append(errs, Invalid("fullName", msg))
		}
	}
	if organization != nil {
		if msg := DisplayTextProblem(*organization); msg != "" {
			errs = append(errs, Invalid("organization", msg))
		}
	}
	return errs
}

// FullName is a person's name as a request body takes it (register, the admin's user routes). Its
// schema, one place for every body that has one, carries what the server enforces: 1–200
// characters, not white space only and without NUL (PersonTexts adds the characters a pattern
// cannot express).
type FullName string

// fullNamePattern: at least one character that is neither white space nor NUL, and no NUL.
const fullNamePattern = "^[^\\x00]*[^\\x00\\t\\n\\v\\f\\r \\x85\\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\\x00]*$"

// Schema implements huma.SchemaProvider.
func (FullName) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeString, MinLength: ptr(1), MaxLength: ptr(200),
		Pattern: fullNamePattern, PatternDescription: "not blank (white space only), without NUL"}
}

func ptr[T any](v T) *T { return &v }
