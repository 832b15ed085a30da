// Package emailaddr accepts the one form of email address the service stores: a bare
// local@domain, compared case-insensitively, with one spelling per mailbox: the local part
// lower-cased in Unicode NFC and the domain in its Unicode (U-label, IDNA2008 with UTS #46) form,
// so "x@xn--bcher-kva.example" and "x@BÜCHER.example" are both "x@bücher.example". Display names,
// angle brackets, comments and quoted local parts, which net/mail.ParseAddress accepts, are
// refused: stored as typed they would bypass the uniqueness of lower(email).
package emailaddr

import (
	"errors"
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
	"golang.org/x/text/unicode/norm"
)

// MaxLen is the longest address accepted (RFC 5321's path limit less the angle brackets).
const MaxLen = 254

// Message is the client-facing reason an address is refused.
const Message = "must be a plain email address such as ada@example.com (no display name, angle brackets, quotes or comments)"

// ErrInvalid is returned for anything but a bare address.
var ErrInvalid = errors.New("email: " + Message)

// domains maps a domain name to one form for lookup (UTS #46, non-transitional: "ß" stays) and
// checks it (IDNA2008 label rules, the Bidi rule, the DNS lengths of its ASCII form). Hyphens in
// the third and fourth place ("r3---sn-ab") are allowed, as browsers allow them.
var domains = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false),
	idna.CheckHyphens(false), idna.VerifyDNSLength(true))

// Normalize returns s as stored and compared: surrounding white space trimmed, the local part
// lower-cased in NFC, the domain in its Unicode form (see the package comment). It returns
// ErrInvalid unless s is a bare local@domain whose local part is a dot-atom (no quoted string) of at
// most 64 bytes, whose domain is a valid host name (letters, digits and hyphens in dot-separated
// labels), and which is at most MaxLen bytes as typed and as stored.
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
	// NFC before lower-casing too: a letter whose lower case differs composed and decomposed
	// ("İ" against "I" + U+0307) must end as one spelling.
	local, domain := norm.NFC.String(strings.ToLower(norm.NFC.String(s[:at]))), s[at+1:]
	if local == "" || len(local) > 64 || domain == "" || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") {
		return "", ErrInvalid
	}
	ascii, err := domains.ToASCII(domain)
	if err != nil {
		return "", ErrInvalid
	}
	if domain, err = domains.ToUnicode(ascii); err != nil {
		return "", ErrInvalid
	}
	// The Unicode form must lead back to the same ASCII form. "xn--xn--00-000a" decodes to a
	// label that itself begins "xn--", which no longer converts: stored, it could never be read
	// back or written to.
	if again, err := domains.ToASCII(domain); err != nil || again != ascii {
		return "", ErrInvalid
	}
	for _, label := range strings.Split(domain, ".") {
		if label == "" || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return "", ErrInvalid
		}
		for _, r := range label {
			if r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.IsMark(r) {
				return "", ErrInvalid
			}
		}
	}
	out := local + "@" + domain
	if len(out) > MaxLen {
		return "", ErrInvalid
	}
	// What is stored must read back as itself: the same bare address, nothing around it.
	if a, err := mail.ParseAddress(out); err != nil || a.Name != "" || a.Address != out {
		return "", ErrInvalid
	}
	return out, nil
}

// Valid reports whether Normalize accepts s.
func Valid(s string) bool {
	_, err := Normalize(s)
	return err == nil
}

// ASCIIDomain returns a stored address with its domain in ASCII (A-labels: "x@bücher.example" →
// "x@xn--bcher-kva.example"), the form every mail server routes without SMTPUTF8. An address
// whose domain cannot be converted is returned as it is.
func ASCIIDomain(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	if at < 0 {
		return addr
	}
	ascii, err := domains.ToASCII(addr[at+1:])
	if err != nil {
		return addr
	}
	return addr[:at+1] + ascii
}
