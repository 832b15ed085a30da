package app_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys/aikeystest"
	"provisioner/modules/auth/oauthtest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
	"provisioner/modules/queues/queuestest"
	"provisioner/modules/wfauto/wfautotest"
	"provisioner/platform/ratelimit"
	"provisioner/platform/testutil"
)

// conformance checks every answer the app gives against the served OpenAPI document: the status
// is one the operation lists, the Content-Type is a documented one for it, and the body validates
// against the documented schema (JSON Schema 2020-12, the dialect of OpenAPI 3.1, with
// santhosh-tekuri/jsonschema). It is the app client's transport, so every request of a test
// (apptest's helpers included) is checked and counted per operation.
type conformance struct {
	base     http.RoundTripper
	host     string
	ops      []*docOp
	compiler *jsonschema.Compiler

	mu       sync.Mutex
	schemas  map[string]*jsonschema.Schema
	problems []string
}

type docOp struct {
	method, path string
	re           *regexp.Regexp
	responses    map[string]map[string]bool // status -> media types (empty: no body)
	headers      map[string]map[string]bool // status -> documented header (canonical) -> required
	pointers     map[string]string          // status -> JSON pointer of the response ($ref followed)
	seen         map[int]int                // status -> answers
}

func (o *docOp) name() string { return o.method + " " + o.path }

func newConformance(t *testing.T, a *apptest.App) *conformance {
	t.Helper()
	r := a.Get("/api/openapi.json", "")
	require.Equal(t, http.StatusOK, r.Status)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(r.Raw, &doc))
	parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.Raw))
	require.NoError(t, err)
	c := &conformance{base: a.Client.Transport, schemas: map[string]*jsonschema.Schema{}, compiler: jsonschema.NewCompiler()}
	if c.base == nil {
		c.base = http.DefaultTransport
	}
	u, _ := url.Parse(a.URL)
	c.host = u.Host
	c.compiler.DefaultDraft(jsonschema.Draft2020)
	c.compiler.AssertFormat()
	require.NoError(t, c.compiler.AddResource("openapi.json", parsed))
	paths, _ := doc["paths"].(map[string]any)
	for path, byMethod := range paths {
		for method, op := range byMethod.(map[string]any) {
			o := &docOp{method: strings.ToUpper(method), path: path, responses: map[string]map[string]bool{},
				headers: map[string]map[string]bool{}, pointers: map[string]string{}, seen: map[int]int{}}
			o.re = regexp.MustCompile("^" + pathParam.ReplaceAllString(strings.ReplaceAll(path, ".", `\.`), `[^/]+`) + "$")
			responses, _ := op.(map[string]any)["responses"].(map[string]any)
			for status, resp := range responses {
				// A response, and each of its headers, may be a $ref to a shared one (components).
				res, ptr := followRef(t, doc, resp, "/paths/"+pointerToken(path)+"/"+method+"/responses/"+status)
				o.pointers[status] = ptr
				o.responses[status] = map[string]bool{}
				o.headers[status] = map[string]bool{}
				headers, _ := res["headers"].(map[string]any)
				for h, p := range headers {
					header, _ := followRef(t, doc, p, "")
					o.headers[status][http.CanonicalHeaderKey(h)] = header["required"] == true
				}
				content, _ := res["content"].(map[string]any)
				for mt := range content {
					o.responses[status][mt] = true
				}
			}
			c.ops = append(c.ops, o)
		}
	}
	a.Client.Transport = c
	t.Cleanup(func() { // even when the session stopped half-way
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.problems {
			t.Error(p)
		}
	})
	return c
}

func (c *conformance) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problems = append(c.problems, fmt.Sprintf(format, args...))
}

func (c *conformance) match(method, path string) *docOp {
	for _, o := range c.ops {
		if o.method == method && o.re.MatchString(path) {
			return o
		}
	}
	return nil
}

// schema compiles the schema at the document's JSON pointer ptr once.
func (c *conformance) schema(ptr string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.schemas[ptr]; ok {
		return s, nil
	}
	s, err := c.compiler.Compile("openapi.json#" + ptr)
	if err != nil {
		return nil, err
	}
	c.schemas[ptr] = s
	return s, nil
}

// followRef returns v, an object of doc at the JSON pointer ptr, or, when it is a $ref to another
// place of doc (#/components/responses/429), the object there and its pointer.
func followRef(t *testing.T, doc map[string]any, v any, ptr string) (map[string]any, string) {
	t.Helper()
	for range 8 {
		obj, ok := v.(map[string]any)
		require.True(t, ok, "%s is not an object", ptr)
		ref, ok := obj["$ref"].(string)
		if !ok {
			return obj, ptr
		}
		require.True(t, strings.HasPrefix(ref, "#/"), "%s: a $ref outside the document: %s", ptr, ref)
		ptr, v = strings.TrimPrefix(ref, "#"), any(doc)
		for _, token := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
			m, _ := v.(map[string]any)
			v = m[strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")]
		}
		require.NotNil(t, v, "%s refers to nothing", ref)
	}
	require.FailNow(t, "a $ref chain too long", ptr)
	return nil, ""
}

func pointerToken(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
	return url.PathEscape(s)
}

func (c *conformance) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := c.base.RoundTrip(req)
	if err != nil || req.URL.Host != c.host || req.Method == http.MethodHead || req.Method == http.MethodOptions {
		return res, err
	}
	op := c.match(req.Method, req.URL.Path)
	if op == nil {
		return res, nil // not an operation of the document (the document itself, the docs UI)
	}
	raw, rerr := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(raw))
	if rerr != nil {
		c.fail("%s: reading the answer: %v", op.name(), rerr)
		return res, nil
	}
	c.mu.Lock()
	op.seen[res.StatusCode]++
	c.mu.Unlock()
	c.check(op, req, res, raw)
	return res, nil
}

func (c *conformance) check(op *docOp, req *http.Request, res *http.Response, raw []byte) {
	where := fmt.Sprintf("%s (%s %s)", op.name(), req.Method, req.URL.RequestURI())
	status := strconv.Itoa(res.StatusCode)
	content, ok := op.responses[status]
	if !ok {
		c.fail("%s answered %d, which the operation does not list: %.300s", where, res.StatusCode, raw)
		return
	}
	// The headers a client acts on: sent, they are documented; documented as required, they are sent.
	for _, h := range contractHeaders {
		if _, documented := op.headers[status][h]; res.Header.Get(h) != "" && !documented {
			c.fail("%s answered %d with %s: %q, which the document does not describe for it", where, res.StatusCode, h, res.Header.Get(h))
		}
	}
	for h, required := range op.headers[status] {
		if required && res.Header.Get(h) == "" {
			c.fail("%s answered %d without %s, which the document says is always sent", where, res.StatusCode, h)
		}
	}
	ct := res.Header.Get("Content-Type")
	if len(content) == 0 {
		if len(raw) > 0 {
			c.fail("%s answered %d with a body (%s) where the document describes none: %.200s", where, res.StatusCode, ct, raw)
		}
		return
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || !content[mt] {
		c.fail("%s answered %d with Content-Type %q; documented: %v", where, res.StatusCode, ct, keys(content))
		return
	}
	if mt != "application/json" {
		return // text/plain metrics, text/event-stream: no JSON body to validate
	}
	s, err := c.schema(op.pointers[status] + "/content/" + pointerToken(mt) + "/schema")
	if err != nil {
		c.fail("%s %d: the documented schema does not compile: %v", where, res.StatusCode, err)
		return
	}
	body, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		c.fail("%s answered %d with a body that is not JSON: %.200s", where, res.StatusCode, raw)
		return
	}
	if err := s.Validate(body); err != nil {
		c.fail("%s answered %d with a body the documented schema refuses: %v\nbody: %.500s", where, res.StatusCode, err, raw)
	}
}

// contractHeaders are the response headers a generated client reads to act (retry later, sign in
// again, follow a redirect, slow down before a limit is reached), canonical: Retry-After,
// WWW-Authenticate, Location and the rate limits' X-RateLimit-*, RateLimit-Policy and RateLimit.
var contractHeaders = func() []string {
	out := []string{"Retry-After", "Www-Authenticate", "Location"}
	for _, h := range ratelimit.HeaderNames {
		out = append(out, http.CanonicalHeaderKey(h))
	}
	return out
}()

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// report fails the test with every operation that was not answered with both a success (unless
// noSuccess says why none can be had here) and a 4xx. Answers that did not match are reported
// when the test ends.
func (c *conformance) report(t *testing.T, noSuccess map[string]string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var untested []string
	for _, o := range c.ops {
		var ok, client bool
		for st := range o.seen {
			ok = ok || (st >= 200 && st < 400)
			client = client || (st >= 400 && st < 500)
		}
		if _, exempt := noSuccess[o.name()]; !ok && !exempt {
			untested = append(untested, o.name()+": no success answer")
		}
		if !client {
			untested = append(untested, o.name()+": no 4xx answer")
		}
	}
	sort.Strings(untested)
	assert.Empty(t, untested, "every documented operation is exercised (a new route needs a call in TestEveryAnswerMatchesTheOpenAPIDocument)")
}

// TestEveryAnswerMatchesTheOpenAPIDocument drives a realistic session through every operation of
// the served OpenAPI document (a success where the test fakes allow one, and typical refusals), and
// checks every answer against the document: what the generated clients of the SPA and the platform
// teams expect is what they get.
func TestEveryAnswerMatchesTheOpenAPIDocument(t *testing.T) {
	cf := cloudflaretest.New("zone123", "cf-token", "example.com")
	t.Cleanup(cf.Close)
	cell := wfautotest.New("cell-key")
	t.Cleanup(cell.Close)
	ai := aikeystest.New("upstream-key")
	t.Cleanup(ai.Close)
	smtp := testutil.StartSMTP(t)
	gh := oauthtest.New("github")
	t.Cleanup(gh.Close)
	gh.SetUser(oauthtest.User{ID: "4242", Login: "octo", Name: "Octo Cat", Email: "octo-" + testutil.RandomSuffix() + "@example.test", EmailVerified: true})
	const frontend = "http://app.test"
	kv := map[string]any{
		"Dns:BaseUrl": cf.URL, "Dns:ZoneId": "zone123", "Dns:ApiToken": "cf-token", "Dns:ZoneName": "example.com",
		"Dns:CellSubdomain": "cell", "Dns:DefaultContent": "203.0.113.10", "Dns:TimeoutSeconds": 1,
		"WfautoProvisioning:BaseUrl": cell.URL, "WfautoProvisioning:ApiKey": "cell-key", "WfautoProvisioning:TimeoutSeconds": 1,
		"Ai:BaseUrl": ai.URL, "Ai:ApiKey": "upstream-key", "Ai:DefaultModel": "fake-model", "Ai:TimeoutSeconds": 1,
		"Smtp:Host": smtp.Host, "Smtp:Port": smtp.Port,
		"Frontend:BaseUrl": frontend, "Frontend:Origins": []string{frontend},
		"GitHub:ClientId": gh.ClientID, "GitHub:ClientSecret": gh.ClientSecret,
		"GitHub:AuthUrl": gh.URL + "/login/oauth/authorize", "GitHub:TokenUrl": gh.URL + "/login/oauth/access_token",
		"GitHub:ProfileUrl": gh.URL + "/user", "GitHub:EmailUrl": gh.URL + "/user/emails",
		"RateLimit:Register": "1000-M", "RateLimit:PasswordReveal": "1000-M", "RateLimit:Login": "1000-M", "RateLimit:ForgotPasswordPerIp": "4-H",
		"RateLimit:PerIp": "100000-M", "RateLimit:PerUser": "100000-M",
	}
	broker := queuestest.NewProxy(t)
	for k, v := range queuestest.Settings(broker.URL) {
		kv[k] = v
	}
	var engines []string
	if pg := os.Getenv("TEST_TENANT_PG_URL"); pg != "" {
		kv["ConnectionStrings:TenantPostgres"] = pg
		engines = append(engines, "postgres")
	}
	if os.Getenv("TEST_TENANT_MYSQL_DSN") != "" {
		kv["ConnectionStrings:TenantMysql"] = testutil.TenantMysqlDSN()
		engines = append(engines, "mysql")
	}
	a := apptest.Start(t, apptest.With(kv))
	a.Cfg.Server.PublicUrl = a.URL // OAuth callbacks are built from the address the app listens on
	t.Cleanup(func() {
		_, _ = a.DB.Exec("UPDATE dns_records SET status = 'Failed' WHERE status = 'Pending'")
		_, _ = a.DB.Exec("UPDATE wfauto_accounts SET status = 'Failed' WHERE status = 'Pending'")
		rows, err := a.DB.Query("SELECT vhost, username FROM queue_spaces")
		if err == nil { // the broker keeps nothing of this test
			defer rows.Close()
			for rows.Next() {
				var vhost, user string
				if rows.Scan(&vhost, &user) == nil {
					queuestest.Call(t, http.MethodDelete, "/api/users/"+user)
					queuestest.Call(t, http.MethodDelete, "/api/vhosts/"+vhost)
				}
			}
		}
	})
	c := newConformance(t, a)

	// want sends r and requires status (the session depends on it); the conformance of the answer
	// is checked by the transport either way.
	want := func(status int, r apptest.Request) *apptest.Resp {
		t.Helper()
		res := a.Do(r)
		require.Equal(t, status, res.Status, "%s %s: %s", r.Method, r.Path, res.Raw)
		return res
	}
	get := func(status int, path, token string) *apptest.Resp {
		t.Helper()
		return want(status, apptest.Request{Method: http.MethodGet, Path: path, Token: token})
	}
	post := func(status int, path, token string, body any) *apptest.Resp {
		t.Helper()
		return want(status, apptest.Request{Method: http.MethodPost, Path: path, Token: token, Body: body})
	}
	put := func(status int, path, token string, body any) *apptest.Resp {
		t.Helper()
		return want(status, apptest.Request{Method: http.MethodPut, Path: path, Token: token, Body: body})
	}
	del := func(status int, path, token string) *apptest.Resp {
		t.Helper()
		return want(status, apptest.Request{Method: http.MethodDelete, Path: path, Token: token})
	}
	idOf := func(r *apptest.Resp) string {
		t.Helper()
		var v struct {
			ID         int64 `json:"id"`
			InstanceID int64 `json:"databaseInstanceId"`
		}
		r.Decode(t, &v)
		if v.ID == 0 {
			v.ID = v.InstanceID
		}
		require.NotZero(t, v.ID, string(r.Raw))
		return strconv.FormatInt(v.ID, 10)
	}
	num := func(id string) int64 { n, _ := strconv.ParseInt(id, 10, 64); return n }
	const missing = "987654321"

	// Public and operational routes.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/api/engines", "/api/metrics/platform"} {
		get(http.StatusOK, p, "")
	}

	// Sign-up, sign-in, password reset.
	u := a.Register(t)
	post(http.StatusConflict, "/api/auth/register", "", map[string]any{"fullName": "Again", "email": u.Email, "password": u.Password})
	post(http.StatusBadRequest, "/api/auth/register", "", map[string]any{"fullName": "", "email": "not-an-email", "password": "x"})
	post(http.StatusOK, "/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password})
	post(http.StatusUnauthorized, "/api/auth/login", "", map[string]any{"email": u.Email, "password": "wrong-" + u.Password})
	post(http.StatusBadRequest, "/api/auth/login", "", map[string]any{"email": u.Email})
	post(http.StatusOK, "/api/auth/forgot-password", "", map[string]any{"email": u.Email})
	post(http.StatusBadRequest, "/api/auth/forgot-password", "", map[string]any{"email": "no"})
	msg := smtp.WaitFor(t, u.Email, 10*time.Second)
	_, after, found := strings.Cut(msg, frontend+"/auth/reset-password#token=")
	require.True(t, found, msg)
	post(http.StatusBadRequest, "/api/auth/reset-password", "", map[string]any{"token": "not-a-token", "newPassword": "a-fine-new-passphrase-9"})
	u.Password = "a-fine-new-passphrase-9"
	post(http.StatusOK, "/api/auth/reset-password", "", map[string]any{"token": strings.Fields(after)[0], "newPassword": u.Password})
	r := post(http.StatusOK, "/api/auth/login", "", map[string]any{"email": u.Email, "password": u.Password})
	var login struct {
		AccessToken string `json:"accessToken"`
	}
	r.Decode(t, &login)
	u.Token = login.AccessToken
	get(http.StatusOK, "/api/me", u.Token)
	get(http.StatusUnauthorized, "/api/me", "")
	sessionsAndMFA(t, a, want, u.Email, u.Password)
	// A rate limit reached: the per-IP limit of forgot-password (4 an hour here).
	for i := 0; i < 4; i++ {
		a.Post("/api/auth/forgot-password", "", map[string]any{"email": "nobody@example.test"})
	}
	post(http.StatusTooManyRequests, "/api/auth/forgot-password", "", map[string]any{"email": "nobody@example.test"})

	// OAuth: a browser's round trip through the fake GitHub (its answers from the app checked too).
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Transport: c, CheckRedirect: func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), frontend) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
	res, err := browser.Get(a.URL + "/api/auth/login/github")
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusFound, res.StatusCode)
	assert.Contains(t, res.Header.Get("Location"), frontend)
	get(http.StatusNotFound, "/api/auth/login/myspace", "")
	get(http.StatusNotFound, "/api/auth/callback/myspace", "")

	// Databases, the user's side.
	var dbIDs []string
	for _, engine := range engines {
		r := post(http.StatusCreated, "/api/me/databases", u.Token, map[string]any{"engine": engine, "name": "app data " + engine})
		dbIDs = append(dbIDs, idOf(r))
	}
	a.Settle(10 * time.Second)
	get(http.StatusOK, "/api/me/databases", u.Token)
	post(http.StatusBadRequest, "/api/me/databases", u.Token, map[string]any{"engine": "oracle"})
	for _, id := range dbIDs {
		get(http.StatusOK, "/api/me/databases/"+id+"/password", u.Token)
		post(http.StatusOK, "/api/me/databases/"+id+"/pause", u.Token, nil)
		post(http.StatusConflict, "/api/me/databases/"+id+"/pause", u.Token, nil)
		post(http.StatusOK, "/api/me/databases/"+id+"/resume", u.Token, nil)
		post(http.StatusOK, "/api/me/databases/"+id+"/rotate-password", u.Token, map[string]any{"gracePeriodSeconds": 60})
		post(http.StatusBadRequest, "/api/me/databases/"+id+"/rotate-password", u.Token, map[string]any{"gracePeriodSeconds": 86401})
	}
	if len(dbIDs) > 0 {
		// An owner password being changed on the engine (what a password reset that took the account
		// over leaves while the engine is unreachable): no reveal until it is, 409 with Retry-After.
		_, err := a.DB.Exec("INSERT INTO database_password_rotations (database_instance_id, next_attempt_at) VALUES (?, now() + interval '1 minute')", num(dbIDs[0]))
		require.NoError(t, err)
		r := get(http.StatusConflict, "/api/me/databases/"+dbIDs[0]+"/password", u.Token)
		assert.NotEmpty(t, r.Header.Get("Retry-After"))
		_, err = a.DB.Exec("UPDATE database_password_rotations SET status = 'Done' WHERE database_instance_id = ?", num(dbIDs[0]))
		require.NoError(t, err)
	}
	get(http.StatusNotFound, "/api/me/databases/"+missing+"/password", u.Token)
	post(http.StatusNotFound, "/api/me/databases/"+missing+"/pause", u.Token, nil)
	post(http.StatusNotFound, "/api/me/databases/"+missing+"/resume", u.Token, nil)
	post(http.StatusNotFound, "/api/me/databases/"+missing+"/rotate-password", u.Token, map[string]any{})
	del(http.StatusNotFound, "/api/me/databases/"+missing, u.Token)

	// DNS, the user's side.
	r = post(http.StatusCreated, "/api/me/dns", u.Token, map[string]any{"label": "blog-" + testutil.RandomSuffix()})
	myRecord := idOf(r)
	post(http.StatusBadRequest, "/api/me/dns", u.Token, map[string]any{"label": "not a label!"})
	a.Settle(5 * time.Second)
	get(http.StatusOK, "/api/me/dns", u.Token)
	del(http.StatusNotFound, "/api/me/dns/"+missing, u.Token)

	// Workflow automation, the user's side.
	post(http.StatusCreated, "/api/me/wfauto/provision", u.Token, nil)
	a.Settle(5 * time.Second)
	get(http.StatusOK, "/api/me/wfauto", u.Token)
	post(http.StatusConflict, "/api/me/wfauto/provision", u.Token, nil)

	// Queue spaces, the user's side.
	r = post(http.StatusCreated, "/api/me/queues", u.Token, map[string]any{"name": "orders"})
	mySpace := idOf(r)
	post(http.StatusBadRequest, "/api/me/queues", u.Token, map[string]any{"name": "a/b"})
	get(http.StatusOK, "/api/me/queues", u.Token)
	get(http.StatusOK, "/api/me/queues/"+mySpace+"/password", u.Token)
	get(http.StatusNotFound, "/api/me/queues/"+missing+"/password", u.Token)
	del(http.StatusNotFound, "/api/me/queues/"+missing, u.Token)

	// AI keys, the gateway.
	r = post(http.StatusCreated, "/api/me/ai-keys", u.Token, map[string]any{"name": "laptop"})
	var key struct {
		ID  int64  `json:"id"`
		Key string `json:"key"`
	}
	r.Decode(t, &key)
	require.NotEmpty(t, key.Key, string(r.Raw))
	keyID := strconv.FormatInt(key.ID, 10)
	post(http.StatusBadRequest, "/api/me/ai-keys", u.Token, map[string]any{"name": ""})
	get(http.StatusOK, "/api/me/ai-keys", u.Token)
	r = post(http.StatusOK, "/api/me/ai-keys/"+keyID+"/rotate", u.Token, map[string]any{"gracePeriodSeconds": 0})
	r.Decode(t, &key)
	require.NotEmpty(t, key.Key, string(r.Raw))
	post(http.StatusNotFound, "/api/me/ai-keys/"+missing+"/rotate", u.Token, map[string]any{})
	// An Idempotency-Key: the first answer, its replay, the key with another body (422) or malformed (400).
	idem := map[string]string{"Idempotency-Key": "conformance-" + testutil.RandomSuffix()}
	for _, st := range []int{http.StatusOK, http.StatusOK} {
		want(st, apptest.Request{Method: http.MethodPost, Path: "/api/me/ai-keys/" + keyID + "/rotate", Token: u.Token, Header: idem, Body: map[string]any{}})
	}
	want(http.StatusUnprocessableEntity, apptest.Request{Method: http.MethodPost, Path: "/api/me/ai-keys/" + keyID + "/rotate", Token: u.Token, Header: idem,
		Body: map[string]any{"gracePeriodSeconds": 60}})
	want(http.StatusBadRequest, apptest.Request{Method: http.MethodPost, Path: "/api/me/ai-keys/" + keyID + "/rotate", Token: u.Token,
		Header: map[string]string{"Idempotency-Key": ""}, Body: map[string]any{}})
	r = want(http.StatusOK, apptest.Request{Method: http.MethodPost, Path: "/api/me/ai-keys/" + keyID + "/rotate", Token: u.Token, Header: idem, Body: map[string]any{}})
	require.Equal(t, "true", r.Header.Get("Idempotent-Replayed"))
	r.Decode(t, &key)
	want(http.StatusOK, apptest.Request{Method: http.MethodPatch, Path: "/api/me/ai-keys/" + keyID, Token: u.Token,
		Body: map[string]any{"tokenBudget": 1000000, "budgetPeriod": "month"}})
	want(http.StatusBadRequest, apptest.Request{Method: http.MethodPatch, Path: "/api/me/ai-keys/" + keyID, Token: u.Token,
		Body: map[string]any{"allowedModels": []string{"not-allowed"}}})
	get(http.StatusOK, "/api/me/ai-keys/"+keyID+"/usage?granularity=day", u.Token)
	get(http.StatusNotFound, "/api/me/ai-keys/"+missing+"/usage", u.Token)
	withKey := map[string]string{"X-API-Key": key.Key}
	want(http.StatusOK, apptest.Request{Method: http.MethodPost, Path: "/api/ai/generate", Header: withKey, Body: map[string]any{"prompt": "Say hello"}})
	want(http.StatusBadRequest, apptest.Request{Method: http.MethodPost, Path: "/api/ai/generate", Header: withKey, Body: map[string]any{"prompt": ""}})
	want(http.StatusUnauthorized, apptest.Request{Method: http.MethodPost, Path: "/api/ai/generate", Body: map[string]any{"prompt": "hi"}})
	chat := map[string]any{"model": "fake-model", "messages": []map[string]any{{"role": "user", "content": "hi"}}}
	want(http.StatusOK, apptest.Request{Method: http.MethodPost, Path: "/api/ai/v1/chat/completions", Header: withKey, Body: chat})
	chat["stream"] = true
	r = want(http.StatusOK, apptest.Request{Method: http.MethodPost, Path: "/api/ai/v1/chat/completions", Header: withKey, Body: chat})
	line, _ := bufio.NewReader(bytes.NewReader(r.Raw)).ReadString('\n')
	assert.True(t, strings.HasPrefix(line, "data: "), "a stream: %s", r.Raw)
	want(http.StatusUnauthorized, apptest.Request{Method: http.MethodPost, Path: "/api/ai/v1/chat/completions", Body: chat})
	// What the upstream's failures become: every answer is checked against the document.
	delete(chat, "stream")
	for _, f := range []struct {
		status   int
		ct, body string
		delay    time.Duration
	}{
		{400, "application/json", `{"error":{"message":"bad","type":"invalid_request_error"}}`, 0},
		{401, "application/json", `{"error":{"message":"bad key","type":"invalid_request_error"}}`, 0},
		{403, "application/json", `{"error":{"message":"forbidden","type":"invalid_request_error"}}`, 0},
		{404, "application/json", `{"error":{"message":"no such model","type":"invalid_request_error"}}`, 0},
		{408, "application/json", `{"error":{"message":"timeout","type":"server_error"}}`, 0},
		{409, "application/json", `{"error":{"message":"conflict","type":"invalid_request_error"}}`, 0},
		{413, "application/json", `{"error":{"message":"too large","type":"invalid_request_error"}}`, 0},
		{422, "application/json", `{"error":{"message":"unprocessable","type":"invalid_request_error"}}`, 0},
		{429, "application/json", `{"error":{"message":"slow down","type":"requests"}}`, 0},
		{500, "application/json", `{"error":{"message":"exploded","type":"server_error"}}`, 0},
		{502, "text/html", `<html>bad gateway</html>`, 0},
		{503, "text/plain", `overloaded`, 0},
		{504, "", ``, 0},
		{400, "text/html", `<html>bad request</html>`, 0},
		{200, "application/json", `not json`, 0},
		{200, "text/html", `<html>hi</html>`, 0},
		{0, "", "", 1500 * time.Millisecond}, // slower than Ai:TimeoutSeconds
	} {
		ai.Set(func(b *aikeystest.Behaviour) {
			*b = aikeystest.Behaviour{Fail: f.status, FailBody: f.body, FailHeader: map[string]string{"Content-Type": f.ct}, Delay: f.delay}
		})
		for _, path := range []string{"/api/ai/v1/chat/completions", "/api/ai/generate"} {
			body := any(chat)
			if path == "/api/ai/generate" {
				body = map[string]any{"prompt": "hi"}
			}
			res := a.Do(apptest.Request{Method: http.MethodPost, Path: path, Header: withKey, Body: body})
			assert.NotEqual(t, http.StatusOK, res.Status, "upstream %d %s: %s", f.status, path, res.Raw)
		}
	}
	ai.Set(func(b *aikeystest.Behaviour) { *b = aikeystest.Behaviour{} })
	want(http.StatusBadRequest, apptest.Request{Method: http.MethodPost, Path: "/api/ai/v1/chat/completions", Header: withKey, Body: `{"messages": "x"`})

	// The admin's side.
	admin := a.AdminToken(t)
	get(http.StatusForbidden, "/api/users", u.Token)
	get(http.StatusOK, "/api/users?page=1&pageSize=5", admin)
	get(http.StatusBadRequest, "/api/users?pageSize=-1", admin)
	r = post(http.StatusCreated, "/api/users", admin, map[string]any{"fullName": "Made By Admin",
		"email": "made-" + testutil.RandomSuffix() + "@example.test", "password": "a-long-enough-passphrase-1", "role": "User"})
	other := idOf(r)
	post(http.StatusBadRequest, "/api/users", admin, map[string]any{"fullName": "x"})
	get(http.StatusOK, "/api/users/"+other, admin)
	get(http.StatusNotFound, "/api/users/"+missing, admin)
	put(http.StatusOK, "/api/users/"+other, admin, map[string]any{"organization": "Elsewhere"})
	put(http.StatusNotFound, "/api/users/"+missing, admin, map[string]any{"organization": "Elsewhere"})
	put(http.StatusOK, "/api/users/"+other, admin, map[string]any{"aiMonthlyTokenBudget": 5000000})
	get(http.StatusOK, "/api/users/"+other+"/ai-usage", admin)
	uid := strconv.FormatInt(u.ID, 10)
	want(http.StatusOK, apptest.Request{Method: http.MethodPatch, Path: "/api/users/" + uid + "/ai-keys/" + keyID, Token: admin,
		Body: map[string]any{"requestBudget": 1000000, "budgetPeriod": "month"}})
	want(http.StatusNotFound, apptest.Request{Method: http.MethodPatch, Path: "/api/users/" + other + "/ai-keys/" + keyID, Token: admin,
		Body: map[string]any{"requestBudget": 1}})
	get(http.StatusBadRequest, "/api/users/"+other+"/ai-usage?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", admin)
	get(http.StatusOK, "/api/users/"+strconv.FormatInt(u.ID, 10)+"/dashboard", admin)
	get(http.StatusOK, "/api/users/"+strconv.FormatInt(u.ID, 10)+"/sessions?pageSize=5", admin)
	get(http.StatusNotFound, "/api/users/"+missing+"/sessions", admin)
	del(http.StatusOK, "/api/users/"+other+"/sessions", admin)
	del(http.StatusNotFound, "/api/users/"+missing+"/sessions", admin)
	get(http.StatusNotFound, "/api/users/"+missing+"/dashboard", admin)

	// Database instances and their access credentials.
	get(http.StatusOK, "/api/database-instances", admin)
	get(http.StatusNotFound, "/api/database-instances/"+missing, admin)
	put(http.StatusNotFound, "/api/database-instances/"+missing, admin, map[string]any{"name": "x"})
	del(http.StatusNotFound, "/api/database-instances/"+missing, admin)
	post(http.StatusBadRequest, "/api/database-instances", admin, map[string]any{})
	get(http.StatusOK, "/api/access-credentials", admin)
	get(http.StatusNotFound, "/api/access-credentials/"+missing, admin)
	put(http.StatusNotFound, "/api/access-credentials/"+missing, admin, map[string]any{"rotatePassword": true})
	del(http.StatusNotFound, "/api/access-credentials/"+missing, admin)
	post(http.StatusBadRequest, "/api/access-credentials", admin, map[string]any{})
	if len(engines) > 0 {
		r = post(http.StatusCreated, "/api/database-instances", admin, map[string]any{"userId": num(other), "engine": engines[0], "name": "by admin"})
		inst := idOf(r)
		a.Settle(10 * time.Second)
		get(http.StatusOK, "/api/database-instances/"+inst, admin)
		put(http.StatusOK, "/api/database-instances/"+inst, admin, map[string]any{"name": "renamed"})
		r = post(http.StatusCreated, "/api/access-credentials", admin, map[string]any{"databaseInstanceId": num(inst), "readOnly": true})
		cred := idOf(r)
		a.Settle(10 * time.Second)
		get(http.StatusOK, "/api/access-credentials?databaseInstanceId="+inst, admin)
		get(http.StatusOK, "/api/access-credentials/"+cred, admin)
		put(http.StatusOK, "/api/access-credentials/"+cred, admin, map[string]any{"rotatePassword": true})
		del(http.StatusOK, "/api/access-credentials/"+cred, admin)
		a.Settle(10 * time.Second)
		del(http.StatusOK, "/api/database-instances/"+inst, admin)
		a.Settle(10 * time.Second)
		post(http.StatusOK, "/api/database-instances/"+inst+"/restore", admin, map[string]any{"userId": num(other)})
		del(http.StatusOK, "/api/database-instances/"+inst+"?purge=true", admin)
		a.Settle(10 * time.Second)
	}

	// DNS records: one the provider refuses to create (Failed), retried once it accepts.
	get(http.StatusOK, "/api/dns/records", admin)
	get(http.StatusOK, "/api/dns/records/"+myRecord, admin)
	get(http.StatusNotFound, "/api/dns/records/"+missing, admin)
	post(http.StatusBadRequest, "/api/dns/records", admin, map[string]any{"userId": num(other)})
	post(http.StatusNotFound, "/api/dns/records/"+missing+"/retry", admin, nil)
	post(http.StatusCreated, "/api/dns/records", admin, map[string]any{"userId": num(other), "label": "ok-" + testutil.RandomSuffix()})
	cf.Fail(cloudflaretest.Fault{Status: 400, Method: http.MethodPost,
		Raw: `{"success":false,"errors":[{"code":9005,"message":"Content for A record is invalid"}],"messages":[],"result":null}`})
	// The create is synchronous: the provider's refusal is a 502 whose data is the Failed record.
	r = post(http.StatusBadGateway, "/api/dns/records", admin, map[string]any{"userId": num(other), "label": "api-" + testutil.RandomSuffix()})
	rec := idOf(r)
	a.Settle(5 * time.Second)
	post(http.StatusOK, "/api/dns/records/"+rec+"/retry", admin, nil)
	a.Settle(5 * time.Second)
	post(http.StatusConflict, "/api/dns/records/"+rec+"/retry", admin, nil)
	del(http.StatusOK, "/api/me/dns/"+myRecord, u.Token)

	// Workflow automation accounts: one the cell fails to make, retried once it works.
	get(http.StatusOK, "/api/wfauto/accounts", admin)
	get(http.StatusNotFound, "/api/wfauto/accounts/"+missing, admin)
	post(http.StatusNotFound, "/api/wfauto/accounts/"+missing+"/retry", admin, nil)
	post(http.StatusBadRequest, "/api/wfauto/accounts", admin, map[string]any{})
	third := a.Register(t)
	post(http.StatusCreated, "/api/wfauto/accounts", admin, map[string]any{"userId": third.ID})
	a.Settle(5 * time.Second)
	cell.SetMode(wfautotest.Fail500)
	r = post(http.StatusBadGateway, "/api/wfauto/accounts", admin, map[string]any{"userId": num(other)})
	acc := idOf(r)
	a.Settle(5 * time.Second)
	cell.SetMode(wfautotest.OK)
	get(http.StatusOK, "/api/wfauto/accounts/"+acc, admin)
	post(http.StatusOK, "/api/wfauto/accounts/"+acc+"/retry", admin, nil)
	a.Settle(5 * time.Second)

	// Queue spaces: one the broker refuses (Failed), retried once it accepts.
	get(http.StatusOK, "/api/queues?status=Active", admin)
	get(http.StatusBadRequest, "/api/queues?status=Gone", admin)
	get(http.StatusOK, "/api/queues/"+mySpace, admin)
	get(http.StatusNotFound, "/api/queues/"+missing, admin)
	post(http.StatusBadRequest, "/api/queues", admin, map[string]any{"userId": num(other)})
	post(http.StatusNotFound, "/api/queues/"+missing+"/retry", admin, nil)
	del(http.StatusNotFound, "/api/queues/"+missing, admin)
	broker.Script(func(int, *http.Request) queuestest.Fault { return queuestest.Refuse400 })
	r = post(http.StatusBadGateway, "/api/queues", admin, map[string]any{"userId": num(other), "name": "refused"})
	space := idOf(r)
	broker.Script(nil)
	post(http.StatusOK, "/api/queues/"+space+"/retry", admin, nil)
	post(http.StatusConflict, "/api/queues/"+space+"/retry", admin, nil)
	r = post(http.StatusCreated, "/api/queues", admin, map[string]any{"userId": num(other), "name": "by admin"})
	post(http.StatusConflict, "/api/queues", admin, map[string]any{"userId": num(other), "name": "over quota"})
	del(http.StatusOK, "/api/queues/"+idOf(r), admin)
	del(http.StatusOK, "/api/me/queues/"+mySpace, u.Token)

	// Audit events.
	r = post(http.StatusCreated, "/api/audit-events", admin, map[string]any{"action": "note.added", "targetType": "user", "targetId": other, "details": map[string]any{"why": "conformance"}})
	ev := idOf(r)
	post(http.StatusBadRequest, "/api/audit-events", admin, map[string]any{"action": ""})
	get(http.StatusOK, "/api/audit-events?pageSize=5", admin)
	get(http.StatusBadRequest, "/api/audit-events?from=yesterday", admin)
	get(http.StatusOK, "/api/audit-events/"+ev, admin)
	get(http.StatusNotFound, "/api/audit-events/"+missing, admin)
	put(http.StatusOK, "/api/audit-events/"+ev, admin, map[string]any{"details": map[string]any{"why": "amended"}})
	put(http.StatusNotFound, "/api/audit-events/"+missing, admin, map[string]any{"action": "x.y"})
	del(http.StatusOK, "/api/audit-events/"+ev, admin)
	del(http.StatusNotFound, "/api/audit-events/"+missing, admin)

	// What the providers' failures become, for users of their own (one resource each).
	for i, f := range []cloudflaretest.Fault{{Status: 429, RetryAfter: 7}, {Status: 500}, {Status: 503, RetryAfter: 2},
		{Delay: 1500 * time.Millisecond}, {Raw: "<html>proxy error</html>", ContentType: "text/html", Status: 502},
		{Raw: `{"success":false,"errors":[{"code":81057,"message":"Record already exists."}],"messages":[],"result":null}`, Status: 400}} {
		f.Method = http.MethodPost
		cf.Fail(f)
		v := a.Register(t)
		// A 5xx may be retried into a 201: only the conformance of the answer matters here.
		a.Post("/api/me/dns", v.Token, map[string]any{"label": fmt.Sprintf("fault%d-%s", i, testutil.RandomSuffix())})
	}
	cell.SetHang(1500 * time.Millisecond) // slower than WfautoProvisioning:TimeoutSeconds
	for _, f := range []struct {
		name string
		set  func()
	}{
		{"429 Retry-After: 5", func() { cell.SetThrottle(429, "5") }},
		{"503", func() { cell.SetThrottle(503, "") }},
		{"400", func() { cell.SetMode(wfautotest.Refuse400) }},
		{"409", func() { cell.SetMode(wfautotest.Conflict409) }},
		{"late", func() { cell.SetMode(wfautotest.Hang) }},
	} {
		f.set()
		v := a.Register(t)
		res := a.Post("/api/me/wfauto/provision", v.Token, nil)
		assert.NotEqual(t, http.StatusCreated, res.Status, "cell answer %s: %s", f.name, res.Raw)
	}
	cell.SetMode(wfautotest.OK)
	a.Settle(5 * time.Second)

	// OAuth callbacks that do not complete: the provider's refusal, a missing or foreign state.
	for _, q := range []string{"?error=access_denied&error_description=no", "?code=abc", "?code=abc&state=forged", ""} {
		a.Get("/api/auth/callback/github"+q, "")
	}
	gh.Deny = true
	res, err = browser.Get(a.URL + "/api/auth/login/github")
	require.NoError(t, err)
	res.Body.Close()
	gh.Deny = false

	// Tear down the user's resources, then the accounts.
	for _, id := range dbIDs {
		del(http.StatusOK, "/api/me/databases/"+id, u.Token)
	}
	post(http.StatusNotFound, "/api/me/databases/"+missing+"/restore", u.Token, nil)
	post(http.StatusNotFound, "/api/database-instances/"+missing+"/restore", admin, nil)
	if len(dbIDs) > 0 {
		post(http.StatusOK, "/api/me/databases/"+dbIDs[0]+"/restore", u.Token, nil)
		del(http.StatusOK, "/api/me/databases/"+dbIDs[0], u.Token)
	}
	del(http.StatusOK, "/api/me/ai-keys/"+keyID, u.Token)
	del(http.StatusNotFound, "/api/me/ai-keys/"+missing, u.Token)
	a.Settle(10 * time.Second)
	del(http.StatusOK, "/api/users/"+other, admin)
	del(http.StatusNotFound, "/api/users/"+missing, admin)

	// Every operation: a body in a charset other than UTF-8 (refused before routing, 415), and
	// the protected ones without a token (401).
	for _, o := range c.ops {
		path := pathParam.ReplaceAllString(o.path, "1")
		res := a.Do(apptest.Request{Method: o.method, Path: path, Body: "{}", Header: map[string]string{"Content-Type": "application/json; charset=iso-8859-1"}})
		assert.Equal(t, http.StatusUnsupportedMediaType, res.Status, "%s: %s", o.name(), res.Raw)
		res = a.Do(apptest.Request{Method: o.method, Path: path + "%00"})
		assert.Equal(t, http.StatusBadRequest, res.Status, "%s: %s", o.name(), res.Raw)
		if strings.HasPrefix(o.path, "/api/") && o.path != "/api/engines" && o.path != "/api/metrics/platform" && !strings.HasPrefix(o.path, "/api/auth/") {
			req := apptest.Request{Method: o.method, Path: path}
			if o.method == http.MethodPost || o.method == http.MethodPut {
				req.Body = map[string]any{}
			}
			res = a.Do(req)
			assert.Equal(t, http.StatusUnauthorized, res.Status, "%s: %s", o.name(), res.Raw)
		}
	}

	// A rate limit can refuse any operation that lists a 429: each documents the Retry-After it carries.
	for _, o := range c.ops {
		if _, limited := o.responses["429"]; limited {
			assert.True(t, o.headers["429"]["Retry-After"], "%s: its 429 documents Retry-After as always sent", o.name())
		}
		// A 503 answered for a transaction a concurrent change got in the way of carries Retry-After: 1
		// (httpx.FromError), on any operation that touches the database (the pass-through answers
		// its own 503s, in OpenAI's format, without one).
		if _, unavailable := o.responses["503"]; unavailable && o.path != "/readyz" && o.path != "/healthz" &&
			o.path != "/api/ai/v1/chat/completions" {
			_, documented := o.headers["503"]["Retry-After"]
			assert.True(t, documented, "%s: its 503 documents the Retry-After it may carry", o.name())
		}
	}

	noSuccess := map[string]string{}
	if len(engines) == 0 {
		for _, op := range []string{"GET /api/me/databases/{id}/password", "POST /api/me/databases/{id}/pause",
			"POST /api/me/databases/{id}/resume", "POST /api/me/databases/{id}/rotate-password", "DELETE /api/me/databases/{id}", "POST /api/database-instances",
			"GET /api/database-instances/{id}", "PUT /api/database-instances/{id}", "DELETE /api/database-instances/{id}",
			"POST /api/access-credentials", "GET /api/access-credentials/{id}", "PUT /api/access-credentials/{id}",
			"DELETE /api/access-credentials/{id}", "POST /api/me/databases/{id}/restore", "POST /api/database-instances/{id}/restore"} {
			noSuccess[op] = "no tenant engine in this environment"
		}
	}
	c.report(t, noSuccess)
}

// sessionsAndMFA exercises the sessions and the second factor: refresh, the session list, ending
// sessions, logout, and a user of its own through TOTP enrolment, an MFA sign-in, step-up and
// turning TOTP off. The sessions of email's account that existed before are left alone.
func sessionsAndMFA(t *testing.T, a *apptest.App, want func(int, apptest.Request) *apptest.Resp, email, password string) {
	t.Helper()
	post := func(status int, path, token string, body any) *apptest.Resp {
		t.Helper()
		return want(status, apptest.Request{Method: http.MethodPost, Path: path, Token: token, Body: body})
	}
	var tk struct {
		AccessToken  string `json:"accessToken"`
		RefreshToken string `json:"refreshToken"`
		SessionID    int64  `json:"sessionId"`
		MFAToken     string `json:"mfaToken"`
	}
	post(http.StatusOK, "/api/auth/login", "", map[string]any{"email": email, "password": password}).Decode(t, &tk)
	post(http.StatusOK, "/api/auth/refresh", "", map[string]any{"refreshToken": tk.RefreshToken}).Decode(t, &tk)
	post(http.StatusUnauthorized, "/api/auth/refresh", "", map[string]any{"refreshToken": "not-a-refresh-token"})
	want(http.StatusOK, apptest.Request{Method: http.MethodGet, Path: "/api/me/sessions", Token: tk.AccessToken})
	want(http.StatusNotFound, apptest.Request{Method: http.MethodDelete, Path: "/api/me/sessions/987654321", Token: tk.AccessToken})
	second := post(http.StatusOK, "/api/auth/login", "", map[string]any{"email": email, "password": password})
	var other struct {
		SessionID int64 `json:"sessionId"`
	}
	second.Decode(t, &other)
	want(http.StatusOK, apptest.Request{Method: http.MethodDelete, Path: fmt.Sprintf("/api/me/sessions/%d", other.SessionID), Token: tk.AccessToken})
	post(http.StatusOK, "/api/auth/logout", tk.AccessToken, nil)

	v := a.Register(t)
	post(http.StatusOK, "/api/auth/login", "", map[string]any{"email": v.Email, "password": v.Password})
	want(http.StatusOK, apptest.Request{Method: http.MethodDelete, Path: "/api/me/sessions", Token: v.Token})
	post(http.StatusConflict, "/api/me/mfa/totp/verify", v.Token, map[string]any{"code": "123456"})
	var e struct {
		Secret string `json:"secret"`
	}
	post(http.StatusCreated, "/api/me/mfa/totp", v.Token, nil).Decode(t, &e)
	now, err := totp.GenerateCode(e.Secret, time.Now())
	require.NoError(t, err)
	post(http.StatusBadRequest, "/api/me/mfa/totp/verify", v.Token, map[string]any{"code": "x"})
	var codes struct {
		RecoveryCodes []string `json:"recoveryCodes"`
	}
	post(http.StatusOK, "/api/me/mfa/totp/verify", v.Token, map[string]any{"code": now}).Decode(t, &codes)
	require.Len(t, codes.RecoveryCodes, 10)
	post(http.StatusConflict, "/api/me/mfa/totp", v.Token, nil)
	post(http.StatusOK, "/api/auth/login", "", map[string]any{"email": v.Email, "password": v.Password}).Decode(t, &tk)
	post(http.StatusUnauthorized, "/api/auth/mfa", "", map[string]any{"mfaToken": tk.MFAToken, "code": now})
	next, err := totp.GenerateCode(e.Secret, time.Now().Add(30*time.Second))
	require.NoError(t, err)
	post(http.StatusOK, "/api/auth/mfa", "", map[string]any{"mfaToken": tk.MFAToken, "code": next}).Decode(t, &tk)
	post(http.StatusBadRequest, "/api/me/mfa/step-up", tk.AccessToken, map[string]any{"code": "wrong-code"})
	post(http.StatusOK, "/api/me/mfa/step-up", tk.AccessToken, map[string]any{"code": codes.RecoveryCodes[0]})
	off := func(status int, code string) {
		t.Helper()
		want(status, apptest.Request{Method: http.MethodDelete, Path: "/api/me/mfa/totp", Token: tk.AccessToken, Body: map[string]any{"code": code}})
	}
	off(http.StatusBadRequest, "wrong-code")
	off(http.StatusOK, codes.RecoveryCodes[1])
	off(http.StatusConflict, codes.RecoveryCodes[2])
	post(http.StatusConflict, "/api/me/mfa/step-up", tk.AccessToken, map[string]any{"code": codes.RecoveryCodes[2]})
}
