package redact

import "strings"

// secretPrefixes begin the credentials of well-known services (OpenAI/Stripe, GitHub, GitLab, Slack,
// AWS, Google, Hugging Face, npm, PyPI, SendGrid, webhooks) and JWTs ("eyJ", a JSON header).
var secretPrefixes = []string{"sk-", "sk_", "pk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
	"glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxs-", "AKIA", "ASIA", "AIza", "ya29.", "hf_", "npm_", "pypi-", "SG.",
	"whsec_", "eyJ"}

// tokenLike reports whether w, a word of 24 or more token characters, looks like a credential
// rather than words: it holds a digit (letters and digits mixed, or a long number), starts like a
// known secret format, mixes the cases of its letters the way random text does (see
// randomCase), or is base64 (a '+' or '=' among letters of both cases). Joined words such as organization_not_allowed, invalid-request-parameter or
// ThisAccountIsNotAllowedToCreateZones are none of these.
func tokenLike(w string) bool {
	if strings.ContainsAny(w, "0123456789") {
		return true
	}
	for _, p := range secretPrefixes {
		if strings.HasPrefix(w, p) {
			return true
		}
	}
	if strings.ContainsAny(w, "+=") && strings.ContainsAny(w, upperLetters) && strings.ContainsAny(w, lowerLetters) {
		return true
	}
	return randomCase(w)
}

const (
	upperLetters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	lowerLetters = "abcdefghijklmnopqrstuvwxyz"
)

// randomCase reports whether w's letters mix upper and lower case as random letters do: each case
// a quarter of them or more, and upper-case letters next to each other at least twice (in
// CamelCase words an upper-case letter starts a word and is followed by lower-case ones).
func randomCase(w string) bool {
	upper, lower, pairs := 0, 0, 0
	prevUpper := false
	for i := 0; i < len(w); i++ {
		c := w[i]
		isUpper := 'A' <= c && c <= 'Z'
		switch {
		case isUpper:
			upper++
			if prevUpper {
				pairs++
			}
		case 'a' <= c && c <= 'z':
			lower++
		}
		prevUpper = isUpper
	}
	letters := upper + lower
	return 4*upper >= letters && 4*lower >= letters && pairs >= 2
}
