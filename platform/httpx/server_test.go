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

// TestWithArticle: messages read "only a Active database".
func TestWithArticle(t *testing.T) {
	for word, want := range map[string]string{"Active": "an Active", "Paused": "a Paused", "Expired": "an Expired",
		"Failed": "a Failed", "Unknown": "an Unknown", "User": "a User", "": ""} {
		assert.Equal(t, want, httpx.WithArticle(word))
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
