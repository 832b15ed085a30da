package app_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/aikeys/aikeystest"
	"provisioner/modules/auth/oauthtest"
	"provisioner/modules/dns/cloudflare/cloudflaretest"
	"provisioner/modules/queues/queuestest"
	"provisioner/modules/wfauto/wfautotest"
	"provisioner/platform/testutil"
)

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
