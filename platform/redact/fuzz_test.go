package redact_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"provisioner/platform/redact"
)

// FuzzMessage: whatever a provider answers, Message's result is valid UTF-8, one line, bounded,
// and holds neither the secret (an API token: letters, digits, '-', '_') nor any piece of it of
// redact.MinSecretLen bytes or more.
func FuzzMessage(f *testing.F) {
	f.Add("invalid token cfTok0123456789abcd (cfTok0123456789ab)", "cfTok0123456789abcd")
	f.Add("x Tok0123456789abcd\ny", "cfTok0123456789abcd")
	f.Add("short", "short-secret")
	f.Fuzz(func(t *testing.T, msg, secret string) {
		secret = strings.Map(func(r rune) rune {
			if r < utf8.RuneSelf && (r == '-' || r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')) {
				return r
			}
			return -1
		}, secret)
		out := redact.Message(msg, 200, secret)
		if !utf8.ValidString(out) || strings.ContainsAny(out, "\n\r") || len(out) > 200+len("…") {
			t.Fatalf("bad output %q", out)
		}
		if len(secret) < redact.MinSecretLen {
			return
		}
		for i := 0; i+redact.MinSecretLen <= len(secret); i++ {
			if strings.Contains(out, secret[i:i+redact.MinSecretLen]) {
				t.Fatalf("piece %q of the secret in %q", secret[i:i+redact.MinSecretLen], out)
			}
		}
	})
}
