package redact_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"provisioner/platform/redact"
)

// everyEscaped writes s with every character as a \u escape (upper-case hex when upper).
func everyEscaped(s string, upper bool) string {
	var b strings.Builder
	for _, r := range s {
		if upper {
			fmt.Fprintf(&b, `\u%04X`, r)
		} else {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func TestSecretFindsEveryWrittenForm(t *testing.T) {
	const key = "sk-a/b+c<d>e&f01"
	s := redact.NewSecret(key)
	cases := []struct{ name, in, want string }{
		{"as it is", `{"m":"key sk-a/b+c<d>e&f01 here"}`, `{"m":"key [redacted] here"}`},
		{"twice", "sk-a/b+c<d>e&f01 sk-a/b+c<d>e&f01", "[redacted] [redacted]"},
		{"solidus escaped (PHP)", `{"m":"key sk-a\/b+c<d>e&f01"}`, `{"m":"key [redacted]"}`},
		{"HTML-safe escapes (Go)", `{"m":"sk-a/b+c\u003cd\u003ee\u0026f01"}`, `{"m":"[redacted]"}`},
		{"upper-case hex", `"sk-a\/b\u002Bc\u003Cd\u003Ee\u0026f01"`, `"[redacted]"`},
		{"every character escaped", `"` + everyEscaped(key, false) + `"`, `"[redacted]"`},
		{"every character escaped, upper", `"` + everyEscaped(key, true) + `"`, `"[redacted]"`},
		{"escaped first character", `x \u0073k-a/b+c<d>e&f01`, `x [redacted]`},
		{"with other escapes around", `"line\nsk-a\/b+c<d>e&f01\tend\""`, `"line\n[redacted]\tend\""`},
		{"cut short is kept", `"sk-a\/b+c<d>e&"`, `"sk-a\/b+c<d>e&"`},
		{"a broken escape is no match", `"sk-a\x/b+c<d>e&f01"`, `"sk-a\x/b+c<d>e&f01"`},
		{"another key kept", `"sk-a\/b+c<d>e&f0g"`, `"sk-a\/b+c<d>e&f0g"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, string(s.Redact([]byte(tc.in))))
			assert.Equal(t, tc.want, s.RedactString(tc.in))
		})
	}
}

func TestSecretOddCharacters(t *testing.T) {
	// A key with a quote, a backslash and a character beyond the BMP (a surrogate pair in JSON).
	s := redact.NewSecret(`apikey-a"b\c😀d`)
	assert.Equal(t, "x [redacted] y", s.RedactString(`x apikey-a"b\c😀d y`), "as it is")
	assert.Equal(t, `"x [redacted] y"`, s.RedactString(`"x apikey-a\"b\\c\ud83d\ude00d y"`), "JSON-escaped")
	assert.Equal(t, `"x [redacted] y"`, s.RedactString(`"x apikey-a\u0022b\u005Cc😀d y"`), "JSON-escaped, the emoji as it is")
}

func TestSecretLeavesPlaceholderKeysAlone(t *testing.T) {
	// Local servers take any key; "ollama" or "x" in an answer is a word, not our credential.
	for _, k := range []string{"x", "EMPTY", "ollama", "lm-studio", "not-needed"} {
		assert.Nil(t, redact.NewSecret(k), k)
		assert.Equal(t, "run ollama with EMPTY x", redact.NewSecret(k).RedactString("run ollama with EMPTY x"), k)
	}
	assert.NotNil(t, redact.NewSecret("sk-no-key-required"), "16 bytes or more is looked for")
}

func TestSecretNoAllocationWithoutIt(t *testing.T) {
	line := []byte(`data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"use \"sk-\" keys\nsk-a/b"}}]}`)
	s := redact.NewSecret("sk-a/b+c-0123456789")
	var none *redact.Secret
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() { _ = s.Redact(line) }))
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() { _ = none.Redact(line) }))
	assert.Equal(t, 0.0, testing.AllocsPerRun(100, func() { _ = s.RedactString(string(line[:20])) }))
	assert.Same(t, &line[0], &s.Redact(line)[0], "the same bytes back")
	assert.Nil(t, redact.NewSecret(""), "an empty secret finds nothing")
	assert.Equal(t, "a  b", none.RedactString("a  b"))
}

// BenchmarkSecretRedact: the cost per relayed stream line, with and without escapes, with the key
// absent (the usual case) and present.
func BenchmarkSecretRedact(b *testing.B) {
	s := redact.NewSecret("upstream-secret-0123456789abcdef")
	for name, line := range map[string]string{
		"plain":       `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"content":"Hello, how are you today?"}}]}`,
		"escapes":     `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"fake-model","choices":[{"index":0,"delta":{"content":"line one\nline \"two\"\nunder \u003cthree\u003e"}}]}`,
		"key present": `data: {"error":{"message":"Incorrect API key provided: upstream\u002dsecret-0123456789abcdef","type":"invalid_request_error"}}`,
	} {
		bl := []byte(line)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bl)))
			for b.Loop() {
				_ = s.Redact(bl)
			}
		})
	}
}
