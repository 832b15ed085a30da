package httpx_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/httpx"
)

// TestBodyOverOneMiB announces a body over the limit and checks the envelope, over a raw
// connection that sends only the start of the body: the server answers before reading it.
func TestBodyOverOneMiB(t *testing.T) {
	base := newServer(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST /api/widgets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"name\":\"", 2<<20)
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	assert.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	assert.Contains(t, string(raw), `"success":false`)
	assert.Contains(t, string(raw), "1 MiB")
	assert.NotEmpty(t, res.Header.Get("X-Request-Id"))
}

func TestValidationListsEveryBadField(t *testing.T) {
	base := newServer(t)
	res, env, raw := call(t, "POST", base+"/api/widgets", `{"name":"","email":"nope","count":9,"role":"Admin"}`, nil)
	require.Equal(t, 400, res.StatusCode, raw)
	var fields []string
	for _, e := range env.Errors {
		fields = append(fields, e.Field)
	}
	assert.ElementsMatch(t, []string{"name", "email", "count"}, fields, raw)

	res, env, _ = call(t, "POST", base+"/api/widgets", `{}`, nil)
	require.Equal(t, 400, res.StatusCode)
	assert.Len(t, env.Errors, 3, "missing required fields are each listed")
}

// TestValidationListsSchemaAndResolverErrorsTogether: a field failing a Resolve check is listed
// with the fields failing the JSON schema, in one 400.
func TestValidationListsSchemaAndResolverErrorsTogether(t *testing.T) {
	base := newServer(t)
	res, env, raw := call(t, "POST", base+"/api/widgets", `{"name":"","email":"a@b.invalid","count":9}`, nil)
	require.Equal(t, 400, res.StatusCode, raw)
	assert.Equal(t, "Validation failed", env.Message)
	var fields []string
	for _, e := range env.Errors {
		fields = append(fields, e.Field)
	}
	assert.ElementsMatch(t, []string{"name", "email", "count"}, fields, raw)
	assert.Contains(t, raw, "must not be an .invalid address")

	res, env, raw = call(t, "POST", base+"/api/widgets", `{"name":"a","email":"not an address.invalid","count":1}`, nil)
	require.Equal(t, 400, res.StatusCode, raw)
	require.Len(t, env.Errors, 1, "one entry per field, the schema's: %s", raw)
	assert.Equal(t, "email", env.Errors[0].Field)
	assert.NotContains(t, raw, ".invalid address")

	res, env, raw = call(t, "POST", base+"/api/widgets", `{"name":"a","email":"a@b.invalid","count":1}`, nil)
	require.Equal(t, 400, res.StatusCode, raw)
	require.Len(t, env.Errors, 1)
	assert.Equal(t, "email", env.Errors[0].Field)
}

// TestBodyIsDecodedAsValidated: the handler receives exactly the members the JSON schema checked.
// encoding/json matched names case-insensitively and kept the last duplicate, so a "NAME" member
// (an unchecked extra for the schema) overwrote the validated "name".
func TestBodyIsDecodedAsValidated(t *testing.T) {
	base := newServer(t)
	res, env, raw := call(t, "POST", base+"/api/widgets", `{"name":"ok","email":"a@b.co","count":2,"NAME":"far too long a name"}`, nil)
	require.Equal(t, 201, res.StatusCode, raw)
	var w widget
	require.NoError(t, json.Unmarshal(env.Data, &w))
	assert.Equal(t, "ok", w.Name, "a case variant of a member name is not that member")

	res, env, raw = call(t, "POST", base+"/api/widgets", `{"NAME":"ok","email":"a@b.co","count":2}`, nil)
	require.Equal(t, 400, res.StatusCode, "a case variant does not satisfy a required member: %s", raw)
	require.Len(t, env.Errors, 1, raw)
	assert.Equal(t, "name", env.Errors[0].Field)

	for name, body := range map[string]string{
		"duplicate name":      `{"name":"ok","email":"a@b.co","count":2,"name":"far too long a name"}`,
		"duplicate unchecked": `{"name":"ok","email":"a@b.co","count":2,"x":1,"x":2}`,
		"invalid UTF-8":       "{\"name\":\"o\xffk\",\"email\":\"a@b.co\",\"count\":2}",
	} {
		t.Run(name, func(t *testing.T) {
			res, env, raw := call(t, "POST", base+"/api/widgets", body, nil)
			assert.Equal(t, 400, res.StatusCode, raw)
			assert.False(t, env.Success)
			require.NotEmpty(t, env.Errors, raw)
			assert.NotContains(t, raw, "offset", "no decoder internals")
		})
	}
	_, _, raw = call(t, "POST", base+"/api/widgets", `{"name":"ok","email":"a@b.co","count":2,"name":"x"}`, nil)
	assert.Contains(t, raw, `duplicate member \"name\"`)
}

// TestBodyWithNothingToDecode: an optional body the schema alone describes (a struct with no
// exported field, as POST /api/me/wfauto/provision takes) accepts an object or no body at all;
// json/v2 refuses such a struct as a target, which answered {} with a 400.
func TestBodyWithNothingToDecode(t *testing.T) {
	base := newServer(t)
	for _, body := range []string{"", `{}`, `{"anything":[1,"two"]}`} {
		res, env, raw := call(t, "POST", base+"/api/widgets/7/poke", body, nil)
		require.Equal(t, 200, res.StatusCode, "body %q: %s", body, raw)
		assert.True(t, env.Success)
	}
	for _, body := range []string{`[]`, `{"a":1,"a":2}`, `{"a":"\u0000"}`, `{`} {
		res, _, raw := call(t, "POST", base+"/api/widgets/7/poke", body, nil)
		assert.Equal(t, 400, res.StatusCode, "body %q: %s", body, raw)
	}
}

// TestNULIsRefused: PostgreSQL text cannot hold a NUL character; a body or a URL carrying one is a
// 400 before any handler runs (it was stored, or failed as a 500, further in).
func TestNULIsRefused(t *testing.T) {
	base := newServer(t)
	for name, body := range map[string]string{
		"in a string":      `{"name":"a\u0000b","email":"a@b.co","count":2}`,
		"in an extra":      `{"name":"ab","email":"a@b.co","count":2,"note":{"list":["x","\u0000"]}}`,
		"in a member name": `{"name":"ab","email":"a@b.co","count":2,"n\u0000":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			res, env, raw := call(t, "POST", base+"/api/widgets", body, nil)
			assert.Equal(t, 400, res.StatusCode, raw)
			require.Len(t, env.Errors, 1, raw)
			assert.Contains(t, env.Errors[0].Message, "NUL")
		})
	}
	_, env, _ := call(t, "POST", base+"/api/widgets", `{"name":"ab","email":"a@b.co","count":2,"note":{"list":["x","\u0000"]}}`, nil)
	assert.Equal(t, "note.list[1]", env.Errors[0].Field, "the error says where")

	for _, path := range []string{"/api/widgets/1%00", "/api/widgets?page=1%00", "/api/nothing%00here", "/api/widgets/1?x=%00"} {
		res, env, raw := call(t, "GET", base+path, "", nil)
		assert.Equal(t, 400, res.StatusCode, "%s: %s", path, raw)
		assert.Equal(t, "The URL must not contain NUL characters (%00)", env.Message, path)
		assert.NotEmpty(t, res.Header.Get("X-Request-Id"))
	}
	res, _, raw := call(t, "GET", base+"/api/widgets/1?x=%2500", "", nil)
	assert.Equal(t, 200, res.StatusCode, "an escaped percent sign is no NUL: %s", raw)
}

func TestUnsupportedContentType(t *testing.T) {
	base := newServer(t)
	res, env, raw := call(t, "POST", base+"/api/widgets", `{"name":"a","email":"a@b.co","count":2}`,
		map[string]string{"Content-Type": "text/plain"})
	assert.Equal(t, 415, res.StatusCode, raw)
	assert.Equal(t, "Unsupported Content-Type: send application/json", env.Message)
}

// TestMediaTypesAreCaseInsensitive: Application/JSON was a 415 (RFC 9110: media types and
// parameter names are case-insensitive); multipart/form-data was a bare 400 "Malformed request".
func TestMediaTypesAreCaseInsensitive(t *testing.T) {
	base := newServer(t)
	body := `{"name":"a","email":"a@b.co","count":2}`
	for _, ct := range []string{"Application/JSON", "application/json; charset=UTF-8", "APPLICATION/JSON; CHARSET=utf-8", "application/json ; charset=utf-8"} {
		res, _, raw := call(t, "POST", base+"/api/widgets", body, map[string]string{"Content-Type": ct})
		assert.Equal(t, 201, res.StatusCode, "%s: %s", ct, raw)
	}
	for _, ct := range []string{"multipart/form-data; boundary=x", "application/x-www-form-urlencoded", "Text/Plain"} {
		res, env, raw := call(t, "POST", base+"/api/widgets", body, map[string]string{"Content-Type": ct})
		assert.Equal(t, 415, res.StatusCode, "%s: %s", ct, raw)
		assert.Equal(t, "Unsupported Content-Type: send application/json", env.Message, ct)
	}
}

// TestValidationPrintsWholeNumbers: a 1 MiB minimum read "expected number >= 1.048576e+06".
func TestValidationPrintsWholeNumbers(t *testing.T) {
	base := newServer(t)
	res, env, raw := call(t, "POST", base+"/api/widgets", `{"name":"a","email":"a@b.co","count":2,"space":5}`, nil)
	require.Equal(t, 400, res.StatusCode, raw)
	require.Len(t, env.Errors, 1, raw)
	assert.Equal(t, "space", env.Errors[0].Field)
	assert.Equal(t, "expected number >= 1048576", env.Errors[0].Message)
}

type hiddenMembers struct {
	Name string `json:"name" minLength:"1"`
}

type hiddenIn struct {
	Body struct {
		hiddenMembers
		UserID int64 `json:"userId"`
	}
}

// TestEmbeddedUnexportedBodyIsRefused: a body embedding an unexported struct would be decoded
// (encoding/json fills its members) but neither documented nor validated by huma; registering it
// fails at once instead of serving it unchecked.
func TestEmbeddedUnexportedBodyIsRefused(t *testing.T) {
	s, err := httpx.NewServer(httpx.ServerOptions{Title: "t", Version: "1"})
	require.NoError(t, err)
	var msg any
	func() {
		defer func() { msg = recover() }()
		httpx.Register(s.API, httpx.Public, huma.Operation{OperationID: "hidden", Method: http.MethodPost, Path: "/api/hidden"},
			func(context.Context, *hiddenIn) (*httpx.Response[widget], error) { return nil, nil })
	}()
	require.NotNil(t, msg, "registered")
	assert.Contains(t, msg, "POST /api/hidden")
	assert.Contains(t, msg, "embeds the unexported httpx_test.hiddenMembers")
}

// TestBodyOverOneMiBFromAnAllowedOrigin: the 413 fasthttp answers before any middleware ran had
// no CORS grant, so a page of Frontend:Origins that sent too large a body saw a CORS failure
// instead of the 413. An origin not allowed still gets no grant.
func TestBodyOverOneMiBFromAnAllowedOrigin(t *testing.T) {
	base := newServer(t)
	for origin, granted := range map[string]bool{"https://app.example.com": true, "https://evil.example.com": false} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		require.NoError(t, err)
		_, err = fmt.Fprintf(conn, "POST /api/widgets HTTP/1.1\r\nHost: x\r\nOrigin: %s\r\nContent-Type: application/json\r\n"+
			"Content-Length: %d\r\n\r\n{", origin, 2<<20)
		require.NoError(t, err)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err)
		res.Body.Close()
		conn.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
		assert.Contains(t, res.Header.Values("Vary"), "Origin", origin)
		if granted {
			assert.Equal(t, origin, res.Header.Get("Access-Control-Allow-Origin"))
			assert.Equal(t, "true", res.Header.Get("Access-Control-Allow-Credentials"))
			assert.Contains(t, res.Header.Get("Access-Control-Expose-Headers"), "X-Request-Id")
		} else {
			assert.Empty(t, res.Header.Get("Access-Control-Allow-Origin"), origin)
			assert.Empty(t, res.Header.Get("Access-Control-Allow-Credentials"), origin)
		}
	}
}
