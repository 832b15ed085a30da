package httpx_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/httpx"
)

type port uint16

// numbers has integer fields of several kinds, none bounded by the schema, so that the decoder
// alone checks their range.
type numbers struct {
	Int   int     `json:"int,omitempty"`
	I8    int8    `json:"i8,omitempty"`
	I64   int64   `json:"i64,omitempty"`
	U     uint    `json:"u,omitempty"`
	U64   uint64  `json:"u64,omitempty"`
	Port  port    `json:"port,omitempty"`
	Ptr   *int32  `json:"ptr,omitempty"`
	List  []int16 `json:"list,omitempty"`
	Ratio float64 `json:"ratio,omitempty"`
}

// registerNumbers adds POST /api/numbers, which answers the body as decoded.
func registerNumbers(api *httpx.API) {
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "echoNumbers", Method: http.MethodPost, Path: "/api/numbers"},
		func(ctx context.Context, in *struct{ Body numbers }) (*httpx.Response[numbers], error) {
			return httpx.OK("ok", in.Body), nil
		})
}

// TestWholeNumbersDecodeIntoIntegers: JSON Schema (and the validation) counts 5.0 and 5e0 as
// integers, but json/v2 refused them for an integer field ("cannot be a number").
func TestWholeNumbersDecodeIntoIntegers(t *testing.T) {
	base := newServer(t)
	res, env, raw := call(t, "POST", base+"/api/numbers", `{"int":5.0,"i8":-1.28e2,"i64":9007199254740993.0,"u":1E+1,
		"u64":1.8446744073709551615e19,"port":4.43e2,"ptr":7e0,"list":[1.0,2e0,-3.00,0.5e1,-0.0],"ratio":2.5}`, nil)
	require.Equal(t, 200, res.StatusCode, raw)
	var got numbers
	require.NoError(t, json.Unmarshal(env.Data, &got))
	seven := int32(7)
	assert.Equal(t, numbers{Int: 5, I8: -128, I64: 9007199254740993, U: 10, U64: 18446744073709551615, Port: 443,
		Ptr: &seven, List: []int16{1, 2, -3, 5, 0}, Ratio: 2.5}, got, "exact values, not rounded through a float")

	for _, c := range []struct{ name, body, field, message string }{
		{"a fraction", `{"int":5.5}`, "int", "expected integer"},
		{"a fraction a float64 cannot hold", `{"int":1.0000000000000000001}`, "int", "must be an integer"},
		{"a fraction in a list", `{"list":[1,2,3e-1]}`, "list[2]", "expected integer"},
		{"beyond int64", `{"i64":1e30}`, "i64", "must be an integer from -9223372036854775808 to 9223372036854775807"},
		{"beyond int8", `{"i8":1.28e2}`, "i8", "must be an integer from -128 to 127"},
		{"beyond int8 written plainly", `{"i8":-129}`, "i8", "must be an integer from -128 to 127"},
		{"beyond uint16 in a named type", `{"port":65536.0}`, "port", "must be an integer from 0 to 65535"},
		{"beyond int16 in a list", `{"list":[1,3.2768e4]}`, "list[1]", "must be an integer from -32768 to 32767"},
		{"beyond uint64", `{"u64":1.8446744073709551616e19}`, "u64", "must be an integer from 0 to 18446744073709551615"},
		{"a huge exponent", `{"int":1e999999999999}`, "int", "must be an integer from -9223372036854775808 to 9223372036854775807"},
		{"a tiny exponent", `{"int":1e-999999999999}`, "int", "must be an integer"},
		{"negative into uint", `{"u":-1}`, "u", "expected number >= 0"},
		{"negative into uint, whole", `{"u":-1.0}`, "u", "expected number >= 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, env, raw := call(t, "POST", base+"/api/numbers", c.body, nil)
			require.Equal(t, 400, res.StatusCode, raw)
			assert.Equal(t, "Validation failed", env.Message)
			require.Len(t, env.Errors, 1, raw)
			assert.Equal(t, c.field, env.Errors[0].Field)
			assert.Contains(t, env.Errors[0].Message, c.message)
		})
	}
}

// TestOneEntryForANumberTheFieldRefuses: a number an integer field cannot hold was listed twice,
// once under "body" with the Go type's range ("\"ttl\" must be an integer from
// -9223372036854775808 to …") and once under the field by its Resolve check; now once, under the
// field, with the field's own range (or "must be an integer" for a fraction).
func TestOneEntryForANumberTheFieldRefuses(t *testing.T) {
	base := newServer(t)
	for _, c := range []struct{ name, body, message string }{
		{"beyond int", `{"ttl":1e308}`, "must be from 60 to 86400"},
		{"beyond float64", `{"ttl":1e400}`, "must be from 60 to 86400"},
		{"a fraction a float64 cannot hold", `{"ttl":300.0000000000000001}`, "must be an integer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, env, raw := call(t, "POST", base+"/api/widgets", `{"name":"a","email":"a@b.example","count":1,`+c.body[1:], nil)
			require.Equal(t, 400, res.StatusCode, raw)
			require.Len(t, env.Errors, 1, raw)
			assert.Equal(t, "ttl", env.Errors[0].Field, raw)
			assert.Equal(t, c.message, env.Errors[0].Message, raw)
		})
	}
}

// TestBeyondRangeNamesTheFieldsRange: a number beyond an integer field's Go type said the type's
// range ("from -9223372036854775808 to …" for a field whose minimum is 1048576), and one beyond a
// float64 (1e400) said only "is a number out of range". Both now name the field's documented
// range: its minimum and maximum within what its type holds.
func TestBeyondRangeNamesTheFieldsRange(t *testing.T) {
	base := newServer(t)
	for _, c := range []struct{ name, path, body, field, message string }{
		{"beyond int64, minimum only", "/api/widgets", `{"space":1e308}`, "space", "must be an integer from 1048576 to 9223372036854775807"},
		{"beyond float64, minimum only", "/api/widgets", `{"space":1e400}`, "space", "must be an integer from 1048576 to 9223372036854775807"},
		{"one past int64", "/api/widgets", `{"space":9223372036854775808}`, "space", "must be an integer from 1048576 to 9223372036854775807"},
		{"beyond float64, minimum and maximum", "/api/widgets", `{"count":1e400}`, "count", "must be an integer from 1 to 5"},
		{"no bounds but the type's", "/api/numbers", `{"i64":1e400}`, "i64", "must be an integer from -9223372036854775808 to 9223372036854775807"},
		{"an element of a list", "/api/numbers", `{"list":[1,-1e400]}`, "list[1]", "must be an integer from -32768 to 32767"},
		{"a named unsigned type", "/api/numbers", `{"port":1e400}`, "port", "must be an integer from 0 to 65535"},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := c.body
			if c.path == "/api/widgets" {
				body = `{"name":"a","email":"a@b.example",` + c.body[1:]
				if c.field != "count" {
					body = `{"count":1,` + body[1:]
				}
			}
			res, env, raw := call(t, "POST", base+c.path, body, nil)
			require.Equal(t, 400, res.StatusCode, raw)
			require.Len(t, env.Errors, 1, raw)
			assert.Equal(t, c.field, env.Errors[0].Field, raw)
			assert.Equal(t, c.message, env.Errors[0].Message, raw)
		})
	}
}

// TestEmptyBodyIsRequired: an empty body where one is required was answered with huma's own
// lower-case "request body is required" and no entry; it is worded as every other message.
func TestEmptyBodyIsRequired(t *testing.T) {
	base := newServer(t)
	res, env, raw := call(t, "POST", base+"/api/widgets", "", map[string]string{"Content-Type": "application/json"})
	require.Equal(t, 400, res.StatusCode, raw)
	assert.Equal(t, "Request body is required", env.Message, raw)
	require.Len(t, env.Errors, 1, raw)
	assert.Equal(t, "body", env.Errors[0].Field)
	assert.Equal(t, "is required", env.Errors[0].Message)
}
