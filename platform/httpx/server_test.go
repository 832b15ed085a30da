package httpx_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/platform/fault"
	"provisioner/platform/httpx"
	"provisioner/platform/testutil"
)

type widgetIn struct {
	Body struct {
		_     struct{} `additionalProperties:"true"`
		Name  string   `json:"name" minLength:"1" maxLength:"10"`
		Email string   `json:"email" format:"email"`
		Count int      `json:"count" minimum:"1" maximum:"5"`
		Space int64    `json:"space,omitempty" minimum:"1048576"`
		TTL   *int     `json:"ttl,omitempty" doc:"Bounded by Resolve alone."`
	}
}

// Resolve is a check the schema cannot express.
func (in *widgetIn) Resolve(huma.Context) []error {
	if strings.HasSuffix(in.Body.Email, ".invalid") {
		return []error{httpx.Invalid("email", "must not be an .invalid address")}
	}
	if in.Body.TTL != nil && (*in.Body.TTL < 60 || *in.Body.TTL > 86400) {
		return []error{httpx.Invalid("ttl", "must be from 60 to 86400")}
	}
	return nil
}

type widget struct {
	Name string `json:"name"`
	IP   string `json:"ip"`
}

type routes struct{}

// sharedResponses is one map of documented responses given to two operations, as a module may.
var sharedResponses = map[string]*huma.Response{"502": {Description: "The provider failed."}}

func (routes) Register(api *httpx.API) {
	registerNumbers(api)
	registerBodyReaders(api)
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "createWidget", Method: http.MethodPost, Path: "/api/widgets", DefaultStatus: 201,
		Responses: sharedResponses},
		func(ctx context.Context, in *widgetIn) (*httpx.Response[widget], error) {
			return httpx.Created("created", widget{Name: in.Body.Name, IP: httpx.ClientIP(ctx)}), nil
		})
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "listWidgets", Method: http.MethodGet, Path: "/api/widgets"},
		func(ctx context.Context, in *struct{ httpx.PageQuery }) (*httpx.Response[httpx.Page[widget]], error) {
			return httpx.OK("ok", httpx.NewPage(in.PageQuery, []widget{{Name: fmt.Sprint(in.Offset())}}, 1)), nil
		})
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "getWidget", Method: http.MethodGet, Path: "/api/widgets/{id}"},
		func(ctx context.Context, in *struct {
			ID int64 `path:"id" minimum:"1"`
		}) (*httpx.Response[widget], error) {
			switch in.ID {
			case 1:
				return httpx.OK("ok", widget{Name: "one"}), nil
			case 2:
				return nil, errors.New("pq: relation \"secret_table\" does not exist")
			case 3:
				panic("boom in handler")
			case 4:
				return nil, httpx.BadGateway("provider failed", widget{Name: "stored"})
			case 5: // what pgx returns while PostgreSQL restarts
				return nil, fmt.Errorf("load widget: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P01",
					Message: "terminating connection due to administrator command"})
			case 6: // a connection exception (class 08)
				return nil, fmt.Errorf("load widget: %w", &pgconn.PgError{Severity: "FATAL", Code: "08006", Message: "connection failure"})
			case 8: // a transaction broken off by a concurrent one: nothing written, try again
				return nil, fmt.Errorf("delete widget: %w", &pgconn.PgError{Severity: "ERROR", Code: "40P01", Message: "deadlock detected"})
			case 10: // a domain error asking for a wait, wrapped
				return nil, fmt.Errorf("widget: %w", fault.TooMany("Slow down", 1500*time.Millisecond))
			case 7: // any other database error is ours: a 500
				return nil, fmt.Errorf("load widget: %w", &pgconn.PgError{Severity: "ERROR", Code: "42P01", Message: "relation \"secret_table\" does not exist"})
			}
			return nil, httpx.ErrNotFound
		})
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "deleteWidget", Method: http.MethodDelete, Path: "/api/widgets/{id}",
		Responses: sharedResponses},
		func(ctx context.Context, in *struct {
			ID int64 `path:"id" minimum:"1"`
		}) (*httpx.Response[httpx.NoData], error) {
			return httpx.Done("deleted"), nil
		})
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "pauseWidget", Method: http.MethodPost, Path: "/api/widgets/{id}/pause"},
		func(ctx context.Context, in *struct {
			ID int64 `path:"id" minimum:"1"`
		}) (*httpx.Response[widget], error) {
			return httpx.OK("paused", widget{Name: fmt.Sprint(in.ID)}), nil
		})
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "pokeWidget", Method: http.MethodPost, Path: "/api/widgets/{id}/poke"},
		func(ctx context.Context, in *struct {
			ID   int64 `path:"id" minimum:"1"`
			Body *struct {
				_ struct{} `additionalProperties:"true"`
			} `required:"false"`
		}) (*httpx.Response[widget], error) {
			return httpx.OK("poked", widget{Name: fmt.Sprint(in.ID)}), nil
		})
}

// buildServer is a server with the test routes, not yet listening.
func buildServer(t *testing.T, o httpx.ServerOptions) *httpx.Server {
	t.Helper()
	o.Title, o.Version = "t", "1"
	s, err := httpx.NewServer(o)
	require.NoError(t, err)
	routes{}.Register(s.API)
	s.Finish()
	return s
}

func newServer(t *testing.T, trusted ...string) string {
	t.Helper()
	s := buildServer(t, httpx.ServerOptions{Origins: []string{"https://app.example.com"}, TrustedProxies: trusted})
	require.NoError(t, s.Listen("127.0.0.1:0"))
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return "http://" + s.Addr()
}

type envelope struct {
	Success bool            `json:"success"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
	Errors  []struct {
		Field, Message string
	} `json:"errors"`
}

func call(t *testing.T, method, url, body string, hdr map[string]string) (*http.Response, envelope, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var env envelope
	if len(raw) > 0 {
		require.NoError(t, json.Unmarshal(raw, &env), "body is JSON: %s", raw)
	}
	return res, env, string(raw)
}

func TestEnvelopeOnEveryOutcome(t *testing.T) {
	base := newServer(t)
	cases := []struct {
		name, method, path, body string
		status                   int
		success                  bool
		contains, notContains    string
	}{
		{"ok", "GET", "/api/widgets/1", "", 200, true, `"name":"one"`, ""},
		{"created", "POST", "/api/widgets", `{"name":"a","email":"a@b.co","count":2}`, 201, true, `"name":"a"`, ""},
		{"unknown route", "GET", "/api/nothing-here", "", 404, false, "No route", ""},
		{"wrong method", "DELETE", "/api/widgets", "", 405, false, "not allowed", ""},
		{"malformed json", "POST", "/api/widgets", `{"name":`, 400, false, "", ""},
		{"not found sentinel", "GET", "/api/widgets/9", "", 404, false, "", ""},
		{"internal error hides details", "GET", "/api/widgets/2", "", 500, false, "unexpected", "secret_table"},
		{"panic hides details", "GET", "/api/widgets/3", "", 500, false, "unexpected", "boom"},
		{"bad gateway carries data", "GET", "/api/widgets/4", "", 502, false, `"name":"stored"`, ""},
		{"bad path param", "GET", "/api/widgets/0", "", 400, false, "", ""},
		{"database restarting", "GET", "/api/widgets/5", "", 503, false, "unavailable", "administrator"},
		{"database connection lost", "GET", "/api/widgets/6", "", 503, false, "unavailable", "08006"},
		{"other database error", "GET", "/api/widgets/7", "", 500, false, "unexpected", "secret_table"},
		{"deadlock", "GET", "/api/widgets/8", "", 503, false, "try again", "deadlock"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, env, raw := call(t, tc.method, base+tc.path, tc.body, nil)
			assert.Equal(t, tc.status, res.StatusCode, raw)
			assert.Equal(t, tc.success, env.Success)
			assert.NotEmpty(t, env.Message)
			assert.Contains(t, res.Header.Get("Content-Type"), "application/json")
			assert.NotEmpty(t, res.Header.Get("X-Request-Id"))
			if tc.contains != "" {
				assert.Contains(t, raw, tc.contains)
			}
			if tc.notContains != "" {
				assert.NotContains(t, raw, tc.notContains)
			}
			assert.NotContains(t, raw, "goroutine")
		})
	}
}

// TestDomainErrorOfAHandlerCarriesRetryAfter: a fault a handler returns is answered with its
// status and its Retry-After (huma writes only the headers of the error the handler returned).
func TestDomainErrorOfAHandlerCarriesRetryAfter(t *testing.T) {
	res, env, raw := call(t, "GET", newServer(t)+"/api/widgets/10", "", nil)
	assert.Equal(t, http.StatusTooManyRequests, res.StatusCode, raw)
	assert.Equal(t, "Slow down", env.Message)
	assert.Equal(t, "2", res.Header.Get("Retry-After"), "1.5 s rounded up")
}

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

// TestMalformedRequestLineDoesNotEchoHeaders: fasthttp's parse error quotes the whole request;
// the answer must not repeat it (the Authorization header would leak into the body).
func TestMalformedRequestLineDoesNotEchoHeaders(t *testing.T) {
	base := newServer(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /api/widgets?q=a b c HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer secret-token-123\r\n\r\n")
	require.NoError(t, err)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	assert.Contains(t, string(raw), `"success":false`)
	assert.NotContains(t, string(raw), "secret-token-123")
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

func TestMethodNotAllowedListsAllow(t *testing.T) {
	base := newServer(t)
	res, _, _ := call(t, "PUT", base+"/api/widgets/1", "", nil)
	assert.Equal(t, 405, res.StatusCode)
	assert.Equal(t, "DELETE, GET, HEAD, OPTIONS", res.Header.Get("Allow"))
	res, _, _ = call(t, "HEAD", base+"/api/widgets/1/poke", "", nil)
	assert.Equal(t, 405, res.StatusCode)
	assert.Equal(t, "OPTIONS, POST", res.Header.Get("Allow"))
}

// TestOptionsWithoutOriginListsAllow: an OPTIONS that is no CORS preflight (no Origin, as curl or
// a client discovering a resource sends it) was a 405 whose Allow left OPTIONS out, refusing the
// very method it was answering. On a routed path it is now 204 with Allow (OPTIONS included); on
// any other path 404 as before.
func TestOptionsWithoutOriginListsAllow(t *testing.T) {
	base := newServer(t)
	res, _, raw := call(t, "OPTIONS", base+"/api/widgets/1", "", nil)
	assert.Equal(t, 204, res.StatusCode, raw)
	assert.Equal(t, "DELETE, GET, HEAD, OPTIONS", res.Header.Get("Allow"))
	assert.Empty(t, raw)
	assert.NotEmpty(t, res.Header.Get("X-Request-Id"))
	res, _, raw = call(t, "OPTIONS", base+"/api/nowhere", "", nil)
	assert.Equal(t, 404, res.StatusCode, raw)
	assert.Empty(t, res.Header.Get("Allow"))
}

func TestRequestIDEchoed(t *testing.T) {
	base := newServer(t)
	res, _, _ := call(t, "GET", base+"/api/widgets/1", "", map[string]string{"X-Request-Id": "abc-123"})
	assert.Equal(t, "abc-123", res.Header.Get("X-Request-Id"))
	res, _, _ = call(t, "GET", base+"/api/widgets/1", "", map[string]string{"X-Request-Id": "bad id\twith spaces"})
	assert.NotEqual(t, "bad id\twith spaces", res.Header.Get("X-Request-Id"))
}

func TestCORS(t *testing.T) {
	base := newServer(t)
	res, _, _ := call(t, "OPTIONS", base+"/api/widgets", "", map[string]string{
		"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST",
	})
	assert.Equal(t, "https://app.example.com", res.Header.Get("Access-Control-Allow-Origin"))
	// The headers an OpenAI SDK sends from a browser, on top of the key and the body's type.
	sdk := "authorization,content-type,x-stainless-os,x-stainless-lang,x-stainless-retry-count"
	res, _, _ = call(t, "OPTIONS", base+"/api/widgets", "", map[string]string{
		"Origin": "https://app.example.com", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": sdk,
	})
	assert.Equal(t, "https://app.example.com", res.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, sdk, res.Header.Get("Access-Control-Allow-Headers"), "every requested header is allowed")
	res, _, _ = call(t, "OPTIONS", base+"/api/widgets", "", map[string]string{
		"Origin": "https://evil.example.com", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": sdk,
	})
	assert.Empty(t, res.Header.Get("Access-Control-Allow-Origin"), "an origin not allowed gets no grant (the browser refuses it)")
}

func TestClientIPBehindTrustedProxyOnly(t *testing.T) {
	body := `{"name":"a","email":"a@b.co","count":1}`
	hdr := map[string]string{"X-Forwarded-For": "203.0.113.9, 198.51.100.7"}

	untrusted := newServer(t)
	_, env, _ := call(t, "POST", untrusted+"/api/widgets", body, hdr)
	var w widget
	require.NoError(t, json.Unmarshal(env.Data, &w))
	assert.Equal(t, "127.0.0.1", w.IP, "X-Forwarded-For is ignored without trusted proxies")

	trusted := newServer(t, "127.0.0.1/32")
	_, env, _ = call(t, "POST", trusted+"/api/widgets", body, hdr)
	require.NoError(t, json.Unmarshal(env.Data, &w))
	assert.Equal(t, "198.51.100.7", w.IP, "the nearest untrusted hop is the client")
}

func TestOpenAPIDocumentDescribesRoutes(t *testing.T) {
	base := newServer(t)
	res, err := http.Get(base + "/api/openapi.json")
	require.NoError(t, err)
	defer res.Body.Close()
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&doc))
	assert.Equal(t, "3.1.0", doc.OpenAPI)
	require.Contains(t, doc.Paths, "/api/widgets")
	assert.Contains(t, doc.Paths["/api/widgets"], "post")
	assert.NotContains(t, string(doc.Paths["/api/widgets"]["post"]), `"422"`, "validation is documented as 400")
	assert.Contains(t, string(doc.Paths["/api/widgets"]["post"]), `"400"`)
	assert.Contains(t, string(doc.Paths["/api/widgets"]["post"]), `"503"`, "a dependency that is down is documented")
}

// TestShutdownClosesConnectionsLeftOpen: a client connection that never sends a request must not
// hold graceful shutdown past its deadline.
func TestShutdownClosesConnectionsLeftOpen(t *testing.T) {
	s := buildServer(t, httpx.ServerOptions{})
	require.NoError(t, s.Listen("127.0.0.1:0"))
	idle, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer idle.Close()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.NoError(t, s.Shutdown(ctx))
	assert.Less(t, time.Since(start), 3*time.Second)
	_ = idle.SetReadDeadline(time.Now().Add(time.Second))
	_, err = idle.Read(make([]byte, 1))
	assert.Error(t, err, "the server closed the connection")
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

// TestPageIsBounded: a page so large that its offset overflowed answered page 1's rows.
func TestPageIsBounded(t *testing.T) {
	base := newServer(t)
	res, _, raw := call(t, "GET", base+"/api/widgets?page=10000000&pageSize=100", "", nil)
	assert.Equal(t, 200, res.StatusCode, raw)
	for _, page := range []string{"10000001", "92233720368547759", "9223372036854775807"} {
		res, env, raw := call(t, "GET", base+"/api/widgets?page="+page, "", nil)
		assert.Equal(t, 400, res.StatusCode, "page %s: %s", page, raw)
		require.NotEmpty(t, env.Errors, raw)
		assert.Equal(t, "page", env.Errors[0].Field)
	}
}

// TestOpenAPIDocumentsEveryBadRequest: an operation whose parameters can fail validation documents
// the 400 it answers, not only POST/PUT/PATCH; one with a body also documents 415.
func TestOpenAPIDocumentsEveryBadRequest(t *testing.T) {
	base := newServer(t)
	raw := servedDocument(t, base)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]any `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	for _, c := range []struct{ method, path, query string }{
		{"get", "/api/widgets/{id}", "/api/widgets/0"},
		{"get", "/api/widgets", "/api/widgets?page=0"},
		{"post", "/api/widgets", ""},
	} {
		op := doc.Paths[c.path][c.method]
		require.Contains(t, op.Responses, "400", "%s %s", c.method, c.path)
		assert.Contains(t, op.Responses["400"].Content, "application/json")
		assert.NotContains(t, op.Responses, "422")
		if c.query != "" {
			res, _, raw := call(t, "GET", base+c.query, "", nil)
			assert.Equal(t, 400, res.StatusCode, "what the document says: %s", raw)
		}
	}
	assert.Contains(t, doc.Paths["/api/widgets"]["post"].Responses, "415")
}

// TestHeadAnswersLikeGet: HEAD answered 405 on every GET route huma registered (RFC 9110: HEAD
// wherever GET), /healthz and /readyz included.
func TestHeadAnswersLikeGet(t *testing.T) {
	base := newServer(t)
	for _, path := range []string{"/api/widgets/1", "/api/widgets/99", "/api/widgets?page=2"} {
		get, _, raw := call(t, "GET", base+path, "", nil)
		head, _, headRaw := call(t, "HEAD", base+path, "", nil)
		assert.Equal(t, get.StatusCode, head.StatusCode, "%s: %s", path, raw)
		assert.Empty(t, headRaw, "HEAD has no body")
		assert.Equal(t, get.Header.Get("Content-Type"), head.Header.Get("Content-Type"), path)
		assert.Equal(t, fmt.Sprint(len(raw)), head.Header.Get("Content-Length"), path)
	}
	res, err := http.Get(base + "/api/openapi.json")
	require.NoError(t, err)
	defer res.Body.Close()
	doc, _ := io.ReadAll(res.Body)
	assert.NotContains(t, string(doc), `"head"`, "the document lists the GET only")
}

// TestEveryAnswerForbidsCachingAndSniffing: answers carry tokens and secrets (register, login,
// password reveal, AI keys), so none may be stored; JSON must never be sniffed as HTML.
func TestEveryAnswerForbidsCachingAndSniffing(t *testing.T) {
	base := newServer(t)
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/widgets/1", ""},                                       // 200
		{"POST", "/api/widgets", `{"name":"a","email":"a@b.co","count":2}`}, // 201
		{"POST", "/api/widgets", `{}`},                                      // 400
		{"GET", "/api/widgets/99", ""},                                      // 404
		{"GET", "/api/nowhere", ""},                                         // no route
		{"PUT", "/api/widgets/1", ""},                                       // 405
		{"GET", "/api/widgets/3", ""},                                       // panic: 500
	} {
		res, _, raw := call(t, c.method, base+c.path, c.body, nil)
		assert.Equal(t, "no-store", res.Header.Get("Cache-Control"), "%s %s: %s", c.method, c.path, raw)
		assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"), "%s %s", c.method, c.path)
		assert.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"), "%s %s", c.method, c.path)
	}
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

// TestRoutesAndIDsHaveOneSpelling: /API/WIDGETS/1, /api/widgets/01 and /api/widgets/+1 all
// answered widget 1. Paths are case-sensitive; an id must be canonical decimal, else it is the 400
// a non-numeric id gets. A trailing slash is still ignored.
func TestRoutesAndIDsHaveOneSpelling(t *testing.T) {
	base := newServer(t)
	res, _, raw := call(t, "GET", base+"/API/WIDGETS/1", "", nil)
	assert.Equal(t, 404, res.StatusCode, raw)
	res, _, raw = call(t, "GET", base+"/api/Widgets", "", nil)
	assert.Equal(t, 404, res.StatusCode, raw)
	for _, id := range []string{"01", "+1", "-1", "1e0", "abc", "%2B1", "00"} {
		res, env, raw := call(t, "GET", base+"/api/widgets/"+id, "", nil)
		assert.Equal(t, 400, res.StatusCode, "%s: %s", id, raw)
		require.Len(t, env.Errors, 1, id)
		assert.Equal(t, "id", env.Errors[0].Field, id)
		assert.Equal(t, "invalid integer", env.Errors[0].Message, id)
	}
	res, _, raw = call(t, "POST", base+"/api/widgets/007/poke", "", nil)
	assert.Equal(t, 400, res.StatusCode, raw)
	res, _, raw = call(t, "GET", base+"/api/widgets/1/", "", nil)
	assert.Equal(t, 200, res.StatusCode, "a trailing slash is ignored: %s", raw)
	res, _, raw = call(t, "GET", base+"/api/widgets/0", "", nil)
	assert.Equal(t, 400, res.StatusCode, "0 is canonical, and below the minimum: %s", raw)
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

// TestNoDataIsDocumentedAsNull: answers without data said `data` was a required object while
// they carried null.
func TestNoDataIsDocumentedAsNull(t *testing.T) {
	base := newServer(t)
	res, env, raw := call(t, "DELETE", base+"/api/widgets/1", "", nil)
	require.Equal(t, 200, res.StatusCode, raw)
	assert.Equal(t, "null", string(env.Data))
	served := servedDocument(t, base)
	var doc struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Required   []string `json:"required"`
				Properties map[string]struct {
					Type any `json:"type"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(served, &doc))
	ref := doc.Paths["/api/widgets/{id}"]["delete"].Responses["200"].Content["application/json"].Schema.Ref
	env200 := doc.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")]
	assert.Contains(t, env200.Required, "data", ref)
	assert.Equal(t, "null", env200.Properties["data"].Type, ref)
}

// TestWithArticle: messages read "only a Active database".
func TestWithArticle(t *testing.T) {
	for word, want := range map[string]string{"Active": "an Active", "Paused": "a Paused", "Expired": "an Expired",
		"Failed": "a Failed", "Unknown": "an Unknown", "User": "a User", "": ""} {
		assert.Equal(t, want, httpx.WithArticle(word))
	}
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

// TestOpenAPIListsWhatEachOperationAnswers: a DELETE given the same Responses map as a create
// listed the create's 201, 413 and 415; a POST without a body listed 413; each operation now lists
// its own 2xx, and 413/415 only where a body can come (POST, PUT, PATCH, declared or not).
func TestOpenAPIListsWhatEachOperationAnswers(t *testing.T) {
	base := newServer(t)
	res, err := http.Get(base + "/api/openapi.json")
	require.NoError(t, err)
	defer res.Body.Close()
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody any                 `json:"requestBody"`
			Responses   map[string]struct{} `json:"responses"`
		} `json:"paths"`
	}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&doc))
	twoHundreds := func(method, path string) []string {
		var out []string
		for code := range doc.Paths[path][method].Responses {
			if code[0] == '2' {
				out = append(out, code)
			}
		}
		return out
	}
	assert.Equal(t, []string{"201"}, twoHundreds("post", "/api/widgets"))
	assert.Equal(t, []string{"200"}, twoHundreds("delete", "/api/widgets/{id}"))
	assert.Contains(t, doc.Paths["/api/widgets/{id}"]["delete"].Responses, "502", "the shared response is kept")
	assert.Contains(t, doc.Paths["/api/widgets"]["post"].Responses, "502")
	for path, ops := range doc.Paths {
		for method, op := range ops {
			assert.NotContains(t, op.Responses, "405", "%s %s never answers 405 itself", method, path)
			// A body, declared or sent anyway, over BodyLimit is a 413, a compressed or non-UTF-8 one
			// a 415, and a URL with %00 a 400, before routing: every operation lists all three.
			for _, code := range []string{"400", "413", "415"} {
				assert.Contains(t, op.Responses, code, "%s %s", method, path)
			}
		}
	}
	assert.Contains(t, doc.Paths, "/api/widgets/{id}/pause")
	// What the document says of the pause: a 200, no body needed.
	res2, _, raw := call(t, "POST", base+"/api/widgets/3/pause", "", nil)
	assert.Equal(t, http.StatusOK, res2.StatusCode, raw)
	// And what it lists for a body sent anyway: a compressed one is a 415.
	res2, _, raw = call(t, "POST", base+"/api/widgets/3/pause", "not really gzip", map[string]string{"Content-Encoding": "gzip"})
	assert.Equal(t, http.StatusUnsupportedMediaType, res2.StatusCode, raw)
	// The same for the methods that take no body, which listed neither 400, 413 nor 415 though the
	// server answers each of them before routing.
	for _, method := range []string{"GET", "DELETE"} {
		res2, _, raw = call(t, method, base+"/api/widgets/3", "not really gzip", map[string]string{"Content-Encoding": "gzip"})
		assert.Equal(t, http.StatusUnsupportedMediaType, res2.StatusCode, "%s: %s", method, raw)
		res2, _, raw = call(t, method, base+"/api/widgets/3?x=%00", "", nil)
		assert.Equal(t, http.StatusBadRequest, res2.StatusCode, "%s: %s", method, raw)
		big := strings.Repeat(" ", httpx.BodyLimit+1)
		res2, _, raw = call(t, method, base+"/api/widgets/3", big, nil)
		assert.Equal(t, http.StatusRequestEntityTooLarge, res2.StatusCode, "%s: %s", method, raw)
	}
}

// TestAQueryParameterIsGivenOnce: ?page=2&page=3 answered page 2, the second value dropped
// without a word (a client filtering on two statuses believed it had). A one-value query
// parameter given more than once is a 400 naming it; other parameters, and names the route does
// not read, are as before.
func TestAQueryParameterIsGivenOnce(t *testing.T) {
	base := newServer(t)
	for _, q := range []string{"page=2&page=3", "pageSize=5&page=1&pageSize=5", "page=2&page="} {
		res, env, raw := call(t, "GET", base+"/api/widgets?"+q, "", nil)
		require.Equal(t, 400, res.StatusCode, "%s: %s", q, raw)
		require.Len(t, env.Errors, 1, raw)
		assert.Contains(t, []string{"page", "pageSize"}, env.Errors[0].Field, q)
		assert.Contains(t, env.Errors[0].Message, "must be given once", q)
	}
	for _, q := range []string{"page=2", "page=2&pageSize=5", "page=2&other=1&other=2"} {
		res, _, raw := call(t, "GET", base+"/api/widgets?"+q, "", nil)
		assert.Equal(t, 200, res.StatusCode, "%s: %s", q, raw)
	}
}

// TestUnknownMethodIsAnsweredInTheEnvelope: a method Fiber does not know (PROPFIND, MKCOL, any
// other token) was answered by Fiber itself, 400 text/plain "Invalid http method", past every
// middleware: no envelope, no request id, no security headers. It is now answered like a known
// method no route takes (TRACE): 405 with Allow on a route's path, 404 elsewhere, in the envelope.
func TestUnknownMethodIsAnsweredInTheEnvelope(t *testing.T) {
	base := newServer(t)
	for _, c := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"PROPFIND", "/api/widgets/1", 405, "DELETE, GET, HEAD, OPTIONS"},
		{"MKCOL", "/api/widgets", 405, "GET, HEAD, OPTIONS, POST"},
		{"FOO", "/api/nowhere", 404, ""},
		{"TRACE", "/api/widgets/1", 405, "DELETE, GET, HEAD, OPTIONS"}, // known to Fiber: the same answer
	} {
		res, env, raw := call(t, c.method, base+c.path, "", map[string]string{"X-Request-Id": "probe-1"})
		assert.Equal(t, c.status, res.StatusCode, "%s %s: %s", c.method, c.path, raw)
		assert.Equal(t, c.allow, res.Header.Get("Allow"), "%s %s", c.method, c.path)
		assert.False(t, env.Success, "%s %s", c.method, c.path)
		assert.Contains(t, env.Message, c.method, "%s %s", c.method, c.path)
		assert.Equal(t, "application/json", res.Header.Get("Content-Type"), "%s %s", c.method, c.path)
		assert.Equal(t, "probe-1", res.Header.Get("X-Request-Id"), "%s %s", c.method, c.path)
		assert.Equal(t, "no-store", res.Header.Get("Cache-Control"), "%s %s", c.method, c.path)
		assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"), "%s %s", c.method, c.path)
	}
}

// TestAnswersBeforeRoutingForbidCachingAndSniffing: what fasthttp refuses before any middleware
// runs (a body announced over 1 MiB, headers too large, a malformed request line) is answered
// through the error handler, which left out the headers every answer carries.
func TestAnswersBeforeRoutingForbidCachingAndSniffing(t *testing.T) {
	base := newServer(t)
	for name, req := range map[string]string{
		"413": "POST /api/widgets HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2097152\r\n\r\n{",
		"431": "GET /api/widgets HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 20000) + "\r\n\r\n",
		"400": "GET /api/widgets?q=a b c HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		require.NoError(t, err)
		_, err = io.WriteString(conn, req)
		require.NoError(t, err)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		require.NoError(t, err, name)
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		conn.Close()
		assert.Equal(t, name, strconv.Itoa(res.StatusCode), "%s", raw)
		assert.Contains(t, string(raw), `"success":false`, name)
		assert.NotEmpty(t, res.Header.Get("X-Request-Id"), name)
		assert.Equal(t, "no-store", res.Header.Get("Cache-Control"), name)
		assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"), name)
		assert.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"), name)
	}
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

// TestLimitHeadersAreDeclaredOnEachResponse: ServerOptions.LimitHeaders are declared on every
// response of every operation, the hand-documented ones included, but the probes (which no limit
// counts): required on a success, optional on an error (some are answered before any limit),
// keeping what a response already declares (the 429's Retry-After). Without LimitHeaders nothing
// is declared (no limit sends them).
func TestLimitHeadersAreDeclaredOnEachResponse(t *testing.T) {
	limit := map[string]*huma.Param{"X-Limit": {Description: "hits", Schema: &huma.Schema{Type: "integer"}}}
	s, err := httpx.NewServer(httpx.ServerOptions{Title: "t", Version: "1", LimitHeaders: limit})
	require.NoError(t, err)
	routes{}.Register(s.API)
	httpx.Register(s.API, httpx.Public, huma.Operation{OperationID: "healthz", Method: http.MethodGet, Path: "/healthz"},
		func(context.Context, *struct{}) (*httpx.Response[widget], error) { return nil, nil })
	s.API.OpenAPI().AddOperation(&huma.Operation{OperationID: "byHand", Method: http.MethodPost, Path: "/api/by-hand",
		Responses: map[string]*huma.Response{"200": {Description: "OK"}}})
	s.Finish()
	doc := s.Document()

	for _, op := range []*huma.Operation{doc.Paths["/api/widgets"].Post, doc.Paths["/api/widgets/{id}"].Get, doc.Paths["/api/by-hand"].Post} {
		require.NotEmpty(t, op.Responses, op.OperationID)
		for code, r := range op.Responses {
			require.Contains(t, r.Headers, "X-Limit", "%s %s", op.OperationID, code)
			assert.Equal(t, code < "400", r.Headers["X-Limit"].Required, "%s %s: required on a success only", op.OperationID, code)
		}
	}
	assert.Contains(t, doc.Paths["/api/widgets"].Post.Responses["429"].Headers, "Retry-After", "kept")
	for code, r := range doc.Paths["/healthz"].Get.Responses {
		assert.NotContains(t, r.Headers, "X-Limit", "a probe's %s", code)
	}
	assert.False(t, limit["X-Limit"].Required, "the given Param is not changed")

	plain := buildServer(t, httpx.ServerOptions{})
	for code, r := range plain.Document().Paths["/api/widgets"].Post.Responses {
		assert.NotContains(t, r.Headers, "X-Limit", code)
	}
}

// servedDocument is the OpenAPI document the server at base serves, its shared responses,
// headers and parameters written out in each operation (testutil.InlineOpenAPI).
func servedDocument(t *testing.T, base string) []byte {
	t.Helper()
	res, err := http.Get(base + "/api/openapi.json")
	require.NoError(t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", raw)
	return testutil.InlineOpenAPI(t, raw)
}
