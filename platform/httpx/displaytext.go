package httpx

import (
	"strings"

	"provisioner/platform/displaytext"

	"github.com/danielgtaylor/huma/v2"
)

// DisplayTextProblem returns what is wrong with a display name (displaytext.Problem), for a
// validation error (httpx.Invalid(field, msg)), or "".
func DisplayTextProblem(s string) string { return displaytext.Problem(s) }

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
