//go:build browser

// Package browser drives a real headless Chromium (Debian's chromium, through playwright-core in
// run.mjs) against the running service: the API reference page renders its operations, and the
// OAuth round trip through a fake GitHub ends on a small frontend page at /auth/callback whose
// script reads access_token from the fragment and calls GET /api/me across origins (cookies,
// redirects and CORS in a real browser). Screenshots are saved under test-output/browser/.
package browser

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"provisioner/modules/auth/oauthtest"
	"provisioner/platform/testutil"
	"provisioner/platform/testutil/apptest"
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
		_, _ = w.Write([]byte(strings.Replace(callbackPage, "<script>", "<script>const API = '"+apiURL+"';", 1)))
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
	cmd := exec.Command("node", "run.mjs", a.URL, out, email)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	require.NoError(t, err, string(raw))
	var res struct {
		DocsOperations int    `json:"docsOperations"`
		Me             string `json:"me"`
		FinalURL       string `json:"finalUrl"`
	}
	require.NoError(t, json.Unmarshal(raw, &res), string(raw))
	assert.Greater(t, res.DocsOperations, 30, "the reference page renders the operations")
	assert.Equal(t, frontend+"/auth/callback", res.FinalURL)
	assert.Contains(t, res.Me, email, "the page's script read the token from the fragment and called /api/me")
	assert.Contains(t, res.Me, "GitHub")
	for _, shot := range []string{"docs.png", "oauth.png"} {
		st, err := os.Stat(filepath.Join(out, shot))
		require.NoError(t, err)
		assert.Positive(t, st.Size())
	}
}
