// Package emailaddr accepts the one form of email address the service stores: a bare
// local@domain, compared case-insensitively. net/mail.ParseAddress (and huma's format:"email",
// which uses it) also takes a display name, angle brackets, comments and quoted local parts
// ("Eve <ada@example.com>"); stored as typed, such a value would bypass the uniqueness of
// lower(email) and send mail to a mailbox other than the one it reads as.
package emailaddr

import (
	"errors"
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen is the longest address accepted (RFC 5321's path limit less the angle brackets).
const MaxLen = 254

// Message is the client-facing reason an address is refused.
const Message = "must be a plain email address such as ada@example.com (no display name, angle brackets, quotes or comments)"

// ErrInvalid is returned for anything but a bare address.
var ErrInvalid = errors.New("email: " + Message)

// Normalize returns s as stored and compared: surrounding white space trimmed, lower-cased. It
// returns ErrInvalid unless what remains is a bare local@domain of at most MaxLen bytes whose
// local part is a dot-atom (no quoted string) and whose domain is a host name (letters, digits and hyphens in dot-separated labels).
func Normalize(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > MaxLen || !utf8.ValidString(s) {
		return "", ErrInvalid
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == '"' || r == '<' || r == '>' || r == '(' || r == ')' ||
			r == '[' || r == ']' || r == '\\' || r == ',' || r == ';' || r == ':' {
			return "", ErrInvalid
		}
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		return "", ErrInvalid
	}
	at := strings.LastIndexByte(s, '@')
	local, domain := s[:at], s[at+1:]
	if local == "" || len(local) > 64 || domain == "" || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") {
		return "", ErrInvalid
	}
	for _, label := range strings.Split(domain, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return "", ErrInvalid
		}
		for _, r := range label {
			if r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				return "", ErrInvalid
			}
		}
	}
	return strings.ToLower(s), nil
}

// Valid reports whether Normalize accepts s.
func Valid(s string) bool {
	_, err := Normalize(s)
	return err == nil
}
