//go:build browser

// Package browser drives a real headless Chromium (Debian's chromium, through playwright-core in
// run.mjs) against the running service: the API reference page renders its operations; the
// OAuth round trip through a fake GitHub ends on a small frontend page at /auth/callback whose
// script reads access_token from the fragment and calls GET /api/me across origins (cookies,
// redirects and CORS in a real browser); and a page at /spa signs in with a password, refreshes,
// logs out, turns TOTP on and signs in with a code its script computes (RFC 6238 with WebCrypto).
// Screenshots are saved under test-output/browser/.
package browser

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/modules/auth/oauthtest"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// callbackPage is the frontend's /auth/callback: it reads the fragment and calls GET /api/me.
const callbackPage = `<!doctype html><html><head><meta charset="utf-8"><title>Signed in</title></head>
<body style="font-family:sans-serif;padding:2em">
<h1>Frontend /auth/callback</h1><p id="status">reading the fragment…</p><pre id="me"></pre>
<script>
const f = new URLSearchParams(location.hash.slice(1));
const status = document.getElementById('status');
if (f.get('error')) { status.textContent = 'error: ' + f.get('error'); }
else {
  status.textContent = 'provider ' + f.get('provider') + ', token expires ' + f.get('expires_at');
  fetch(API + '/api/me', { headers: { Authorization: 'Bearer ' + f.get('access_token') } })
    .then(r => r.json())
    .then(b => { document.getElementById('me').textContent = b.data.name + ' <' + b.data.email + '> via ' + b.data.provider; })
    .catch(e => { status.textContent = 'fetch failed: ' + e; });
}
</script></body></html>`

// spaPage is what an SPA does with sessions: each step's outcome goes into #result as JSON.
const spaPage = `<!doctype html><html><head><meta charset="utf-8"><title>SPA</title></head>
<body style="font-family:sans-serif;padding:2em"><h1>Frontend /spa</h1><pre id="log"></pre><pre id="result"></pre>
<script>
const f = new URLSearchParams(location.hash.slice(1));
const log = (s) => { document.getElementById('log').textContent += s + '\n'; };
async function call(method, path, token, body) {
  const headers = {};
  if (token) headers.Authorization = 'Bearer ' + token;
  if (body) headers['Content-Type'] = 'application/json';
  const r = await fetch(API + path, { method, headers, body: body ? JSON.stringify(body) : undefined });
  const b = await r.json();
  log(method + ' ' + path + ' → ' + r.status);
  return { status: r.status, data: b.data };
}
function base32(s) {
  const abc = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'; let bits = 0, v = 0; const out = [];
  for (const c of s.replace(/=+$/, '').toUpperCase()) {
    v = (v << 5) | abc.indexOf(c); bits += 5;
    if (bits >= 8) { out.push((v >>> (bits - 8)) & 255); bits -= 8; }
  }
  return new Uint8Array(out);
}
// totp is RFC 6238 (HMAC-SHA1, six digits, 30 s) at time ms, as an authenticator app computes it.
async function totp(secret, ms) {
  const counter = Math.floor(ms / 30000), msg = new DataView(new ArrayBuffer(8));
  msg.setUint32(0, Math.floor(counter / 2 ** 32)); msg.setUint32(4, counter >>> 0);
  const key = await crypto.subtle.importKey('raw', base32(secret), { name: 'HMAC', hash: 'SHA-1' }, false, ['sign']);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, msg.buffer));
  const o = mac[19] & 15;
  const n = ((mac[o] & 127) << 24) | (mac[o + 1] << 16) | (mac[o + 2] << 8) | mac[o + 3];
  return String(n % 1000000).padStart(6, '0');
}
(async () => {
  const out = {};
  const creds = { email: f.get('email'), password: f.get('password') };
  let s = (await call('POST', '/api/auth/login', null, creds)).data;
  out.signedIn = !!s.accessToken && !!s.refreshToken;
  const r = await call('POST', '/api/auth/refresh', null, { refreshToken: s.refreshToken });
  out.refreshed = r.status === 200 && r.data.refreshToken !== s.refreshToken;
  out.meAfterRefresh = (await call('GET', '/api/me', r.data.accessToken)).status;
  out.logout = (await call('POST', '/api/auth/logout', r.data.accessToken)).status;
  out.meAfterLogout = (await call('GET', '/api/me', r.data.accessToken)).status;
  out.refreshAfterLogout = (await call('POST', '/api/auth/refresh', null, { refreshToken: r.data.refreshToken })).status;

  s = (await call('POST', '/api/auth/login', null, creds)).data;
  const e = (await call('POST', '/api/me/mfa/totp', s.accessToken)).data;
  const v = await call('POST', '/api/me/mfa/totp/verify', s.accessToken, { code: await totp(e.secret, Date.now()) });
  out.recoveryCodes = v.data.recoveryCodes.length;
  await call('POST', '/api/auth/logout', s.accessToken);
  const pending = (await call('POST', '/api/auth/login', null, creds)).data;
  out.mfaRequired = pending.mfaRequired === true && !pending.accessToken;
  // The next step's code: the one just verified is spent, and the next is within the window.
  const done = await call('POST', '/api/auth/mfa', null, { mfaToken: pending.mfaToken, code: await totp(e.secret, Date.now() + 30000) });
  out.mfaSignIn = done.status;
  const me = await call('GET', '/api/me', done.data.accessToken);
  out.meEmail = me.data.email;
  const sessions = await call('GET', '/api/me/sessions', done.data.accessToken);
  out.mfaLevel = sessions.data.find((x) => x.current).mfaLevel;
  document.getElementById('result').textContent = JSON.stringify(out);
})().catch((err) => { document.getElementById('result').textContent = JSON.stringify({ error: String(err) }); });
</script></body></html>`

func TestDocsAndOAuthInChromium(t *testing.T) {
	if _, err := os.Stat("node_modules/playwright-core"); err != nil {
		t.Fatal("run scripts/browser-test.sh (it installs playwright-core from npm)")
	}
	// The frontend: a tiny static server on its own origin.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	frontend := "http://" + ln.Addr().String()
	var apiURL string
	fe := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		page := callbackPage
		if r.URL.Path == "/spa" {
			page = spaPage
		}
		_, _ = w.Write([]byte(strings.Replace(page, "<script>", "<script>const API = '"+apiURL+"';", 1)))
	})}
	go func() { _ = fe.Serve(ln) }()
	defer fe.Close()

	gh := oauthtest.New("github")
	defer gh.Close()
	email := "browser-" + testutil.RandomSuffix() + "@example.test"
	// A GitHub id of its own per run (a positive number, as GitHub's are): runs sharing the
	// control database (-count>1) must not find each other's identity.
	gh.SetUser(oauthtest.User{ID: fmt.Sprint(1 + rand.Int64N(1<<52)), Login: "browser", Name: "Browser User", Email: email, EmailVerified: true})
	a := apptest.Start(t, apptest.With(map[string]any{
		"GitHub:ClientId": gh.ClientID, "GitHub:ClientSecret": gh.ClientSecret,
		"GitHub:AuthUrl": gh.URL + "/login/oauth/authorize", "GitHub:TokenUrl": gh.URL + "/login/oauth/access_token",
		"GitHub:ProfileUrl": gh.URL + "/user", "GitHub:EmailUrl": gh.URL + "/user/emails",
		"Frontend:BaseUrl": frontend,
	}))
	a.Cfg.Server.PublicUrl = a.URL // callbacks are built from the address it listens on
	apiURL = a.URL

	out, err := filepath.Abs("../../test-output/browser")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(out, 0o755))
	u := a.Register(t)
	spa := frontend + "/spa#" + url.Values{"email": {u.Email}, "password": {u.Password}}.Encode()
	cmd := exec.Command("node", "run.mjs", a.URL, out, email, spa)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	require.NoError(t, err, string(raw))
	var res struct {
		DocsOperations int    `json:"docsOperations"`
		Me             string `json:"me"`
		FinalURL       string `json:"finalUrl"`
		SPA            struct {
			Error              string `json:"error"`
			SignedIn           bool   `json:"signedIn"`
			Refreshed          bool   `json:"refreshed"`
			MeAfterRefresh     int    `json:"meAfterRefresh"`
			Logout             int    `json:"logout"`
			MeAfterLogout      int    `json:"meAfterLogout"`
			RefreshAfterLogout int    `json:"refreshAfterLogout"`
			RecoveryCodes      int    `json:"recoveryCodes"`
			MFARequired        bool   `json:"mfaRequired"`
			MFASignIn          int    `json:"mfaSignIn"`
			MeEmail            string `json:"meEmail"`
			MFALevel           string `json:"mfaLevel"`
		} `json:"spa"`
	}
	require.NoError(t, json.Unmarshal(raw, &res), string(raw))
	assert.Greater(t, res.DocsOperations, 30, "the reference page renders the operations")
	assert.Equal(t, frontend+"/auth/callback", res.FinalURL)
	assert.Contains(t, res.Me, email, "the page's script read the token from the fragment and called /api/me")
	assert.Contains(t, res.Me, "GitHub")
	spaRes := res.SPA
	assert.Empty(t, spaRes.Error)
	assert.True(t, spaRes.SignedIn, "password sign-in answers an access and a refresh token")
	assert.True(t, spaRes.Refreshed, "the refresh rotated the refresh token")
	assert.Equal(t, http.StatusOK, spaRes.MeAfterRefresh)
	assert.Equal(t, http.StatusOK, spaRes.Logout)
	assert.Equal(t, http.StatusUnauthorized, spaRes.MeAfterLogout, "the logged-out session's token is refused")
	assert.Equal(t, http.StatusUnauthorized, spaRes.RefreshAfterLogout)
	assert.Equal(t, 10, spaRes.RecoveryCodes)
	assert.True(t, spaRes.MFARequired, "with TOTP on, the password alone gives no tokens")
	assert.Equal(t, http.StatusOK, spaRes.MFASignIn, "the code the page computed signs in")
	assert.Equal(t, strings.ToLower(u.Email), strings.ToLower(spaRes.MeEmail))
	assert.Equal(t, "aal2", spaRes.MFALevel)
	for _, shot := range []string{"docs.png", "oauth.png", "spa.png"} {
		st, err := os.Stat(filepath.Join(out, shot))
		require.NoError(t, err)
		assert.Positive(t, st.Size())
	}
}
