package idempotency

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/valyala/fasthttp"
)

func TestKeyOf(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []string
		key    string
		given  bool
		bad    string
	}{
		{"absent", nil, "", false, ""},
		{"a UUID", []string{"0b6f2a0e-5d0e-4d7c-9b5e-2d8c1a7f4e10"}, "0b6f2a0e-5d0e-4d7c-9b5e-2d8c1a7f4e10", true, ""},
		{"255 characters", []string{strings.Repeat("k", 255)}, strings.Repeat("k", 255), true, ""},
		{"empty", []string{""}, "", true, "must be 1 to 255 characters"},
		{"256 characters", []string{strings.Repeat("k", 256)}, "", true, "must be 1 to 255 characters"},
		{"not ASCII", []string{"clé"}, "", true, "must hold printable ASCII characters only"},
		{"a control character", []string{"a\tb"}, "", true, "must hold printable ASCII characters only"},
		{"twice", []string{"a", "b"}, "", true, "must be given once (it was given 2 times)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h fasthttp.RequestHeader
			for _, v := range c.values {
				h.Add("Idempotency-Key", v)
			}
			key, given, bad := keyOf(&h)
			assert.Equal(t, c.key, key)
			assert.Equal(t, c.given, given)
			if c.bad == "" {
				assert.Nil(t, bad)
				return
			}
			if assert.NotNil(t, bad) {
				assert.Equal(t, 400, bad.Status)
				assert.Equal(t, "Idempotency-Key", bad.Errors[0].Field)
				assert.Equal(t, c.bad, bad.Errors[0].Message)
			}
		})
	}
}

func TestCanonicalBodyIgnoresMemberOrderAndWhiteSpace(t *testing.T) {
	a := canonicalBody([]byte(`{"name":"x","expiresAt":null,"n":1.50}`))
	b := canonicalBody([]byte(" {\n \"n\": 1.50, \"expiresAt\" : null,\"name\":\"x\"}\n"))
	assert.Equal(t, string(a), string(b))
	assert.NotEqual(t, string(a), string(canonicalBody([]byte(`{"name":"x","expiresAt":null,"n":1.5}`))), "numbers as written")
	assert.NotEqual(t, string(a), string(canonicalBody([]byte(`{"name":"y","expiresAt":null,"n":1.50}`))))
	assert.Equal(t, "{not json", string(canonicalBody([]byte("{not json"))), "any other body as it is")
	assert.Equal(t, `{"a":1} {"b":2}`, string(canonicalBody([]byte(`{"a":1} {"b":2}`))))
}

func TestDigestSeparatesItsParts(t *testing.T) {
	assert.NotEqual(t, digest([]byte("ab"), []byte("c")), digest([]byte("a"), []byte("bc")))
}
