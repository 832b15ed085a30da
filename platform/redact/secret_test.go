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
	const key = "sk-a/b+c<d>e&f"
	s := redact.NewSecret(key)
	cases := []struct{ name, in, want string }{
		{"as it is", `{"m":"key sk-a/b+c<d>e&f here"}`, `{"m":"key [redacted] here"}`},
		{"twice", "sk-a/b+c<d>e&f sk-a/b+c<d>e&f", "[redacted] [redacted]"},
		{"solidus escaped (PHP)", `{"m":"key sk-a\/b+c<d>e&f"}`, `{"m":"key [redacted]"}`},
		{"HTML-safe escapes (Go)", `{"m":"sk-a/b+c\u003cd\u003ee\u0026f"}`, `{"m":"[redacted]"}`},
		{"upper-case hex", `"sk-a\/b\u002Bc\u003Cd\u003Ee\u0026f"`, `"[redacted]"`},
		{"every character escaped", `"` + everyEscaped(key, false) + `"`, `"[redacted]"`},
		{"every character escaped, upper", `"` + everyEscaped(key, true) + `"`, `"[redacted]"`},
		{"escaped first character", `x \u0073k-a/b+c<d>e&f`, `x [redacted]`},
		{"with other escapes around", `"line\nsk-a\/b+c<d>e&f\tend\""`, `"line\n[redacted]\tend\""`},
		{"cut short is kept", `"sk-a\/b+c<d>e&"`, `"sk-a\/b+c<d>e&"`},
		{"a broken escape is no match", `"sk-a\x/b+c<d>e&f"`, `"sk-a\x/b+c<d>e&f"`},
		{"another key kept", `"sk-a\/b+c<d>e&g"`, `"sk-a\/b+c<d>e&g"`},
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
	s := redact.NewSecret(`a"b\c😀d`)
	assert.Equal(t, "x [redacted] y", s.RedactString(`x a"b\c😀d y`), "as it is")
	assert.Equal(t, `"x [redacted] y"`, s.RedactString(`"x a\"b\\c\ud83d\ude00d y"`), "JSON-escaped")
	assert.Equal(t, `"x [redacted] y"`, s.RedactString(`"x a\u0022b\u005Cc😀d y"`), "JSON-escaped, the emoji as it is")
}

func TestSecretNoAllocationWithoutIt(t *testing.T) {
	line := []byte(`data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"use \"sk-\" keys\nsk-a/b"}}]}`)
	s := redact.NewSecret("sk-a/b+c")
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
