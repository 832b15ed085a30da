package redact_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"provisioner/platform/redact"
)

func TestMessage(t *testing.T) {
	cases := []struct {
		name, in string
		secrets  []string
		want     string
	}{
		{"plain words kept", "Content for A record is invalid.", nil, "Content for A record is invalid."},
		{"configured secret", "bad request for short-s3cret!", []string{"short-s3cret!"}, "bad request for [redacted]"},
		{"empty secret ignored", "nothing here", []string{""}, "nothing here"},
		{"echoed Authorization", "invalid. token=Bearer cf-SECRET-token", []string{"cf-SECRET-token"}, "invalid. token=[redacted] [redacted]"},
		{"unknown bearer", "sent Authorization: Bearer abc.def", nil, "sent Authorization: [redacted] [redacted]"},
		{"basic", "got Basic dXNlcjpwYXNz", nil, "got Basic [redacted]"},
		{"key value", "api_key=xyz password: hunter2", nil, "api_key=[redacted] password: [redacted]"},
		{"token-like word", "use sk-abcdefghijklmnopqrstuvwxyz0123456789 please", nil, "use [redacted] please"},
		{"long plain word kept", "Antidisestablishmentarianisms", nil, "Antidisestablishmentarianisms"},
		// A provider's reason code is joined words, not a token: it reaches the user.
		{"snake_case reason kept", "organization_not_allowed: ask an admin", nil, "organization_not_allowed: ask an admin"},
		{"kebab-case reason kept", "invalid-request-parameter-value", nil, "invalid-request-parameter-value"},
		{"CamelCase reason kept", "ThisAccountIsNotAllowedToCreateZones", nil, "ThisAccountIsNotAllowedToCreateZones"},
		{"letters and digits", "got abcdefghijklmnopqrstuvw9 back", nil, "got [redacted] back"},
		{"a long number", "pin 123456789012345678901234", nil, "pin [redacted]"},
		{"known format without digits", "ghp_abcdefghijklmnopqrstuvwxyzab and xoxb-abcdefghijklmnopqrstuvwxyz", nil, "[redacted] and [redacted]"},
		{"JWT-like", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl", nil, "[redacted]"},
		{"random letters", "sent hQxRbTLmwKzpYVdNfGsAeJcu here", nil, "sent [redacted] here"},
		{"base64 without digits", "blob aGVsbG8gd29ybGQgaGVsbG8gd29ybGQ= end", nil, "blob [redacted] end"},
		{"control characters and lines", "one\ntwo\r\n\tthree\x00", nil, "one two three"},
		{"invalid utf-8", "bad \xff byte", nil, "bad byte"},
		// A secret echoed cut short: a piece of 16 bytes or more is redacted, wherever it starts.
		{"secret's prefix", "got cfAbcdefghij012345 end", []string{"cfAbcdefghij0123456"}, "got [redacted] end"},
		{"secret's suffix", "got Abcdefghij0123456, end", []string{"cfAbcdefghij0123456"}, "got [redacted], end"},
		{"run inside the secret", "got (bcdefghij0123456)", []string{"cfAbcdefghij0123456"}, "got ([redacted])"},
		{"two pieces", "cfAbcdefghij0123 and bcdefghij0123456", []string{"cfAbcdefghij0123456"}, "[redacted] and [redacted]"},
		{"piece of 15 bytes kept", "got cfAbcdefghij012 end", []string{"cfAbcdefghij0123456"}, "got cfAbcdefghij012 end"},
		{"short secret: only whole", "short-s3cret and short-s3cr", []string{"short-s3cret!x"}, "short-s3cret and short-s3cr"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, redact.Message(tc.in, 0, tc.secrets...))
		})
	}
}

func TestMessageIsBounded(t *testing.T) {
	long := strings.Repeat("é word ", 100)
	got := redact.Message(long, 50)
	assert.LessOrEqual(t, len(got), 50+len("…"))
	assert.True(t, strings.HasSuffix(got, "…"))
	assert.True(t, utf8.ValidString(got), "cut on a character boundary")
	assert.Equal(t, "short", redact.Message("short", 50))
	// A secret straddling the bound is redacted before the cut, never left in part.
	secret := "zz-secret-value"
	got = redact.Message(strings.Repeat("a ", 22)+secret, 50, secret)
	assert.NotContains(t, got, "zz-secret")
}
