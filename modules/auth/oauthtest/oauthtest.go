// Package oauthtest has in-process fakes of GitHub's and Google's OAuth endpoints for tests: an
// authorize endpoint that sends the browser back with a code and the state, a token endpoint that
// checks the client, the redirect URI and the PKCE verifier, and the user endpoints.
package oauthtest

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
)

// User is the account the fake provider signs in.
type User struct {
	ID            string // empty: the profile has no "id" at all
	Login, Name   string
	Email         string
	EmailVerified bool
}

// Provider is a fake GitHub or Google.
type Provider struct {
	*httptest.Server
	Kind         string // "github" or "google"
	ClientID     string
	ClientSecret string

	mu    sync.Mutex
	user  User
	codes map[string]grant
	// Deny makes the authorize endpoint answer error=access_denied.
	Deny bool
	// TokenStatus, when set, makes the token endpoint fail with it.
	TokenStatus int
	hang        bool
	exchanges   int
}

type grant struct {
	challenge, redirect string
	used                bool
}

// New starts a fake of kind ("github" or "google").
func New(kind string) *Provider {
	p := &Provider{Kind: kind, ClientID: kind + "-client", ClientSecret: kind + "-secret", codes: map[string]grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/login/oauth/authorize", p.authorize) // GitHub
	mux.HandleFunc("/o/oauth2/auth", p.authorize)         // Google
	mux.HandleFunc("/login/oauth/access_token", p.token)  // GitHub
	mux.HandleFunc("/token", p.token)                     // Google
	mux.HandleFunc("/user", p.githubUser)
	mux.HandleFunc("/user/emails", p.githubEmails)
	mux.HandleFunc("/oauth2/v2/userinfo", p.googleUser)
	mux.HandleFunc("/.well-known/openid-configuration", p.discovery)
	p.Server = httptest.NewServer(mux)
	return p
}

// SetUser sets the account the next sign-in returns.
func (p *Provider) SetUser(u User) { p.mu.Lock(); p.user = u; p.mu.Unlock() }

// SetHangUp makes the user endpoints close the connection without an answer (a network failure:
// the client's error names the URL it asked), or answer again.
func (p *Provider) SetHangUp(on bool) { p.mu.Lock(); p.hang = on; p.mu.Unlock() }

// Exchanges counts successful code exchanges.
func (p *Provider) Exchanges() int { p.mu.Lock(); defer p.mu.Unlock(); return p.exchanges }

func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, state := q.Get("redirect_uri"), q.Get("state")
	if q.Get("client_id") != p.ClientID || redirect == "" {
		http.Error(w, "bad client", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(redirect)
	v := url.Values{"state": {state}}
	p.mu.Lock()
	deny := p.Deny
	if !deny {
		code := fmt.Sprintf("code-%d-%s", len(p.codes)+1, state[:6])
		p.codes[code] = grant{challenge: q.Get("code_challenge"), redirect: redirect}
		v.Set("code", code)
	} else {
		v.Set("error", "access_denied")
	}
	p.mu.Unlock()
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.Form.Get("client_id"), r.Form.Get("client_secret")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if p.TokenStatus != 0 {
		w.WriteHeader(p.TokenStatus)
		_, _ = w.Write([]byte(`{"error":"server_error"}`))
		return
	}
	fail := func(e string) {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": e})
	}
	if id != p.ClientID || secret != p.ClientSecret {
		fail("invalid_client")
		return
	}
	g, ok := p.codes[r.Form.Get("code")]
	if !ok || g.used {
		fail("invalid_grant") // unknown or replayed code
		return
	}
	if r.Form.Get("redirect_uri") != "" && r.Form.Get("redirect_uri") != g.redirect {
		fail("invalid_grant")
		return
	}
	if g.challenge != "" {
		sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
		if base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			fail("invalid_grant") // PKCE verifier does not match
			return
		}
	}
	g.used = true
	p.codes[r.Form.Get("code")] = g
	p.exchanges++
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "at-" + p.user.ID, "token_type": "bearer", "expires_in": 3600, "scope": "email"})
}

func (p *Provider) authorized(r *http.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if tok == "" {
		tok = r.URL.Query().Get("access_token")
	}
	return tok == "at-"+p.user.ID
}

func (p *Provider) githubUser(w http.ResponseWriter, r *http.Request) {
	if p.hangUp(w) {
		return
	}
	if !p.authorized(r) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	p.mu.Lock()
	u := p.user
	p.mu.Unlock()
	// GitHub's /user shows the public email, which need not be verified.
	profile := map[string]any{"login": u.Login, "name": u.Name, "email": u.Email}
	if u.ID != "" { // an empty ID: a profile without "id"
		var id int
		_, _ = fmt.Sscan(u.ID, &id)
		profile["id"] = id
	}
	_ = json.NewEncoder(w).Encode(profile)
}

func (p *Provider) githubEmails(w http.ResponseWriter, r *http.Request) {
	if !p.authorized(r) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	p.mu.Lock()
	u := p.user
	p.mu.Unlock()
	_ = json.NewEncoder(w).Encode([]map[string]any{
		{"email": "noreply-" + u.ID + "@users.noreply.github.test", "primary": false, "verified": true},
		{"email": u.Email, "primary": true, "verified": u.EmailVerified},
	})
}

// hangUp closes the connection without an answer when SetHangUp(true) was called, and reports
// whether it did.
func (p *Provider) hangUp(w http.ResponseWriter) bool {
	p.mu.Lock()
	hang := p.hang
	p.mu.Unlock()
	if !hang {
		return false
	}
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
	}
	return true
}

func (p *Provider) googleUser(w http.ResponseWriter, r *http.Request) {
	if p.hangUp(w) {
		return
	}
	if !p.authorized(r) {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	p.mu.Lock()
	u := p.user
	p.mu.Unlock()
	profile := map[string]any{"email": u.Email, "verified_email": u.EmailVerified, "name": u.Name}
	if u.ID != "" { // an empty ID: a profile without "id"
		profile["id"] = u.ID
	}
	_ = json.NewEncoder(w).Encode(profile)
}

func (p *Provider) discovery(w http.ResponseWriter, r *http.Request) {
	_ = json.NewEncoder(w).Encode(map[string]any{"issuer": p.URL, "authorization_endpoint": p.URL + "/o/oauth2/auth",
		"token_endpoint": p.URL + "/token", "userinfo_endpoint": p.URL + "/oauth2/v2/userinfo",
		"code_challenge_methods_supported": []string{"S256"}})
}

// GoogleTransport sends requests for Google's fixed hosts (accounts.google.com,
// oauth2.googleapis.com, www.googleapis.com) to the fake instead.
func (p *Provider) GoogleTransport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	target, _ := url.Parse(p.URL)
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		switch r.URL.Host {
		case "accounts.google.com", "oauth2.googleapis.com", "www.googleapis.com":
			r = r.Clone(r.Context())
			r.URL.Scheme, r.URL.Host = target.Scheme, target.Host
			r.Host = target.Host
		}
		return base.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
