package redact

import (
	"bytes"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Secret finds one secret (an API key we send a provider) in text relayed from that provider, as
// it is or inside a JSON string with any of its characters escaped (`\/`, `\u002B`, surrogate
// pairs…). It redacts a whole text or one line at a time: a stream must be framed into lines first.
// A nil or empty Secret finds nothing.
type Secret struct{ s []byte }

// MinSecretLen is the shortest secret NewSecret looks for. A shorter one is a placeholder, such as
// local OpenAI-compatible servers take ("EMPTY", "ollama", "x"), not a credential: replacing it
// would cut words out of generated answers. Every provider's real key is far longer.
const MinSecretLen = 16

// NewSecret returns the finder for s (nil when s is shorter than MinSecretLen bytes: nothing to
// find).
func NewSecret(s string) *Secret {
	if len(s) < MinSecretLen {
		return nil
	}
	return &Secret{s: []byte(s)}
}

var markBytes = []byte(Mark)

// Redact returns b with every written form of the secret replaced by Mark. Without one it returns
// b itself, unchanged and without allocating; with one, a new slice (b is not modified).
func (s *Secret) Redact(b []byte) []byte {
	if s == nil {
		return b
	}
	if bytes.IndexByte(b, '\\') < 0 { // no escape: only the secret as it is
		if !bytes.Contains(b, s.s) {
			return b
		}
		return bytes.ReplaceAll(b, s.s, markBytes)
	}
	var out []byte
	last := 0
	// Candidates: the secret's first byte (as it is, or followed by escapes) and backslashes
	// (an escaped first character). The next of each is found once and kept until passed.
	first := s.s[0]
	nextFirst, nextEsc := -1, -1
	for i := 0; i < len(b); {
		if nextFirst < i {
			if nextFirst = bytes.IndexByte(b[i:], first); nextFirst < 0 {
				nextFirst = len(b)
			} else {
				nextFirst += i
			}
		}
		if nextEsc < i {
			if nextEsc = bytes.IndexByte(b[i:], '\\'); nextEsc < 0 {
				nextEsc = len(b)
			} else {
				nextEsc += i
			}
		}
		i = min(nextFirst, nextEsc)
		if i >= len(b) {
			break
		}
		end := -1
		if bytes.HasPrefix(b[i:], s.s) {
			end = i + len(s.s)
		} else {
			end = s.escapedAt(b, i)
		}
		if end < 0 {
			i++
			continue
		}
		out = append(append(out, b[last:i]...), markBytes...)
		last, i = end, end
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// RedactString is Redact for a string; without the secret it returns str itself, unallocated.
func (s *Secret) RedactString(str string) string {
	if s == nil || (!strings.Contains(str, string(s.s)) && strings.IndexByte(str, '\\') < 0) {
		return str
	}
	return string(s.Redact([]byte(str)))
}

// escapedAt returns the end of the secret written from b[i] in JSON string syntax (every
// backslash an escape), or -1.
func (s *Secret) escapedAt(b []byte, i int) int {
	var enc [utf8.UTFMax]byte
	for j := 0; j < len(s.s); {
		if i >= len(b) {
			return -1
		}
		if b[i] != '\\' {
			if b[i] != s.s[j] {
				return -1
			}
			i, j = i+1, j+1
			continue
		}
		r, n := unescape(b[i:])
		if n == 0 {
			return -1
		}
		m := utf8.EncodeRune(enc[:], r)
		if !bytes.HasPrefix(s.s[j:], enc[:m]) {
			return -1
		}
		i, j = i+n, j+m
	}
	return i
}

// unescape decodes the JSON escape at the start of b (b[0] is a backslash): the character and the
// bytes it takes, 0 when it is no valid escape.
func unescape(b []byte) (rune, int) {
	if len(b) < 2 {
		return 0, 0
	}
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := hex4(b[2:])
		if !ok {
			return 0, 0
		}
		if utf16.IsSurrogate(r) && len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if lo, ok := hex4(b[8:]); ok {
				if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
					return pair, 12
				}
			}
		}
		return r, 6
	}
	return 0, 0
}

// hex4 reads four hexadecimal digits (either case).
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
