package auth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/markbates/goth"
	"github.com/markbates/goth/providers/github"
	"github.com/markbates/goth/providers/google"
	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/authn"
	"provisioner/platform/config"
	"provisioner/platform/db"
	"provisioner/platform/displaytext"
	"provisioner/platform/emailaddr"
	"provisioner/platform/fault"
	"provisioner/platform/secrets"
)

// StateTTL is how long a sign-in with a provider may take.
const StateTTL = 10 * time.Minute

// stateCookie carries the flow's state, PKCE verifier and return URL between the login redirect
// and the callback: signed (HMAC-SHA256), HttpOnly, SameSite=Lax, scoped to /api/auth (over https:
// hostStateCookie).
const stateCookie = "oauth_flow"

// hostStateCookie is stateCookie's name when Server:PublicUrl is https.
const hostStateCookie = "__Host-" + stateCookie

// OAuth signs users in with GitHub and Google through goth's providers, without gorilla sessions:
// the flow's state lives in a signed cookie, goth's Authorize does not check state so this does,
// and PKCE (S256) is added to the authorization URL and the code exchange.
type OAuth struct {
	svc       *Service
	cfg       *config.Config
	providers Config       // the identity providers' settings
	client    *http.Client // nil: http.DefaultClient; tests route provider hosts to fakes
	key       []byte       // signs the state cookie
}

// NewOAuth builds the OAuth flows; client may be nil.
func NewOAuth(svc *Service, cfg *config.Config, providers Config, client *http.Client) *OAuth {
	mac := hmac.New(sha256.New, []byte(cfg.Jwt.Key))
	mac.Write([]byte("oauth-state-cookie"))
	return &OAuth{svc: svc, cfg: cfg, providers: providers, client: client, key: mac.Sum(nil)}
}

// providerName canonicalises a path segment; "" when unknown or unconfigured.
func (o *OAuth) providerName(p string) string {
	switch strings.ToLower(p) {
	case "github":
		if o.providers.GitHub.Configured() {
			return "github"
		}
	case "google":
		if o.providers.Google.Configured() {
			return "google"
		}
	}
	return ""
}

func (o *OAuth) callbackURL(name string) string {
	return strings.TrimRight(o.cfg.Server.PublicUrl, "/") + "/api/auth/callback/" + name
}

// pkceTransport adds the PKCE code_verifier to the token exchange, which goth's Authorize makes
// without one.
type pkceTransport struct {
	base     http.RoundTripper
	tokenURL string
	verifier string
}

func (t *pkceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil && strings.HasPrefix(r.URL.String(), t.tokenURL) {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, err
		}
		form, err := url.ParseQuery(string(body))
		if err == nil && form.Get("grant_type") == "authorization_code" {
			form.Set("code_verifier", t.verifier)
			body = []byte(form.Encode())
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Del("Content-Length")
	}
	return t.base.RoundTrip(r)
}

// provider builds a goth provider for one flow (cheap), with the PKCE verifier of that flow.
func (o *OAuth) provider(name, verifier string) goth.Provider {
	base := http.DefaultTransport
	if o.client != nil && o.client.Transport != nil {
		base = o.client.Transport
	}
	switch name {
	case "github":
		g := o.providers.GitHub
		auth, tok, prof, mail := orDefault(g.AuthUrl, github.AuthURL), orDefault(g.TokenUrl, github.TokenURL),
			orDefault(g.ProfileUrl, github.ProfileURL), orDefault(g.EmailUrl, github.EmailURL)
		p := github.NewCustomisedURL(g.ClientId, g.ClientSecret, o.callbackURL(name), auth, tok, prof, mail, "read:user", "user:email")
		p.HTTPClient = &http.Client{Timeout: 15 * time.Second, Transport: &pkceTransport{base: base, tokenURL: tok, verifier: verifier}}
		return p
	default:
		p := google.New(o.providers.Google.ClientId, o.providers.Google.ClientSecret, o.callbackURL(name), "openid", "email", "profile")
		// goth asks Google for offline access (a refresh token) by default; sign-in reads the
		// profile once and keeps no Google token, so ask for none that would outlive it.
		p.SetAccessType("online")
		p.HTTPClient = &http.Client{Timeout: 15 * time.Second, Transport: &pkceTransport{base: base, tokenURL: google.Endpoint.TokenURL, verifier: verifier}}
		return p
	}
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

type flow struct {
	Provider  string `json:"p"`
	State     string `json:"s"`
	Verifier  string `json:"v"`
	ReturnURL string `json:"r,omitempty"`
	Expires   int64  `json:"e"`
}

func (o *OAuth) sign(f flow) string {
	raw, _ := json.Marshal(f)
	payload := base64.RawURLEncoding.EncodeToString(raw)
	mac := hmac.New(sha256.New, o.key)
	mac.Write([]byte(payload))
	return payload + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

func (o *OAuth) verify(cookie string) (flow, bool) {
	var f flow
	payload, sig, ok := strings.Cut(cookie, ".")
	if !ok {
		return f, false
	}
	mac := hmac.New(sha256.New, o.key)
	mac.Write([]byte(payload))
	want := base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	if subtle.ConstantTimeCompare([]byte(sig), []byte(want)) != 1 {
		return f, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil || json.Unmarshal(raw, &f) != nil || time.Now().Unix() > f.Expires {
		return f, false
	}
	return f, true
}

// allowedReturn keeps a returnUrl only when its origin is one of Frontend:Origins and its path is
// one returnPathAllowed keeps; "" otherwise (the sign-in then lands on the default page).
func (o *OAuth) allowedReturn(raw string) string {
	if raw == "" || len(raw) > 2000 {
		return ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return ""
	}
	if !returnPathAllowed(u, o.cfg.Frontend.ReturnPaths) {
		return ""
	}
	origin := u.Scheme + "://" + u.Host
	for _, allowed := range o.cfg.AllowedOrigins() {
		if strings.EqualFold(origin, allowed) {
			u.Fragment = ""
			return u.String()
		}
	}
	return ""
}

// returnPathAllowed reports whether u's path may be landed on: written without an encoded slash
// or backslash (%2F, %5C), its decoded form a clean path (config.ReturnPath: no //, backslash,
// '%', "." or ".." segment) that starts with one of prefixes at a segment boundary ("/app" takes
// /app and /app/x, not /application). A frontend router that decodes the path again, or resolves
// it against another base, can then not be steered off the listed paths (to //evil.example).
func returnPathAllowed(u *url.URL, prefixes []string) bool {
	escaped := strings.ToLower(u.EscapedPath())
	if strings.Contains(escaped, "%2f") || strings.Contains(escaped, "%5c") {
		return false
	}
	p := u.Path
	if p == "" {
		p = "/"
	}
	if !config.ReturnPath(p) {
		return false
	}
	for _, prefix := range prefixes {
		if p == prefix || (strings.HasPrefix(p, prefix) && (strings.HasSuffix(prefix, "/") || p[len(prefix)] == '/')) {
			return true
		}
	}
	return false
}

// Begin starts a flow: the provider's authorization URL and the signed cookie value.
func (o *OAuth) Begin(name, returnURL string) (authURL, cookie string, err error) {
	state := secrets.RandomToken(32)
	verifier := secrets.RandomToken(48)
	sess, err := o.provider(name, verifier).BeginAuth(state)
	if err != nil {
		return "", "", fmt.Errorf("begin %s sign-in: %w", name, err)
	}
	raw, err := sess.GetAuthURL()
	if err != nil {
		return "", "", fmt.Errorf("begin %s sign-in: %w", name, err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("begin %s sign-in: %w", name, err)
	}
	sum := sha256.Sum256([]byte(verifier))
	q := u.Query()
	q.Set("code_challenge", base64.RawURLEncoding.EncodeToString(sum[:]))
	q.Set("code_challenge_method", "S256")
	u.RawQuery = q.Encode()
	f := flow{Provider: name, State: state, Verifier: verifier, ReturnURL: o.allowedReturn(returnURL), Expires: time.Now().Add(StateTTL).Unix()}
	return u.String(), o.sign(f), nil
}

// flowError is a failure reported to the frontend as #error=<Code>.
type flowError struct{ Code string }

func (e *flowError) Error() string { return "oauth: " + e.Code }

// Identity is what the provider vouched for.
type Identity struct {
	Provider, ProviderUserID, Email, Name string
	EmailVerified                         bool
}

// Finish checks the state against the cookie, spends it, exchanges the code, fetches the user and
// signs them in. It returns the auth result and where to send the browser.
func (o *OAuth) Finish(ctx context.Context, name, cookie string, query url.Values, c Client) (*LoginResult, string, error) {
	f, ok := o.verify(cookie)
	if !ok || f.Provider != name || query.Get("state") == "" ||
		subtle.ConstantTimeCompare([]byte(f.State), []byte(query.Get("state"))) != 1 {
		return nil, f.ReturnURL, &flowError{"invalid_state"}
	}
	if err := o.spend(ctx, f.State); err != nil {
		return nil, f.ReturnURL, err
	}
	if e := query.Get("error"); e != "" {
		code := "provider_error"
		if e == "access_denied" {
			code = "access_denied"
		}
		return nil, f.ReturnURL, &flowError{code}
	}
	if query.Get("code") == "" {
		return nil, f.ReturnURL, &flowError{"missing_code"}
	}
	p := o.provider(name, f.Verifier)
	sess, err := p.BeginAuth(f.State)
	if err != nil {
		return nil, f.ReturnURL, &flowError{"provider_error"}
	}
	if _, err := sess.Authorize(p, query); err != nil {
		o.svc.log.WarnContext(ctx, "oauth code exchange failed", "provider", name, "error", providerError(err))
		return nil, f.ReturnURL, &flowError{"provider_error"}
	}
	gu, err := p.FetchUser(sess)
	if err != nil && !errors.Is(err, github.ErrNoVerifiedGitHubPrimaryEmail) {
		o.svc.log.WarnContext(ctx, "oauth user fetch failed", "provider", name, "error", providerError(err))
		return nil, f.ReturnURL, &flowError{"provider_error"}
	}
	if !validProviderUserID(name, gu.UserID) {
		// A profile without its id would be one identity shared by everyone whose profile lacks
		// it (goth writes GitHub's missing numeric id as "0"): the second such person would be
		// signed in to the first one's account.
		o.svc.log.WarnContext(ctx, "oauth profile without a usable user id", "provider", name)
		return nil, f.ReturnURL, &flowError{"provider_error"}
	}
	id := Identity{Provider: name, ProviderUserID: gu.UserID, Name: firstNonEmpty(gu.Name, gu.NickName)}
	switch name {
	case "github":
		id.Email, id.EmailVerified, err = o.githubPrimaryEmail(ctx, p.(*github.Provider), gu.AccessToken)
		if err != nil {
			return nil, f.ReturnURL, &flowError{"provider_error"}
		}
	case "google":
		id.Email = gu.Email
		id.EmailVerified, _ = gu.RawData["verified_email"].(bool)
		if v, ok := gu.RawData["email_verified"].(bool); ok {
			id.EmailVerified = v
		}
	}
	res, err := o.svc.SignInExternal(ctx, id, c)
	return res, f.ReturnURL, err
}

// providerError is the text of a provider call's error fit for the log. A request that failed in
// the network is a *url.Error naming the URL it asked, query included, and goth asks Google for
// the profile with the user's access token in the query (?access_token=…): the URL is shown
// without its query (nor user info or fragment).
func providerError(err error) string {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err.Error()
	}
	shown := *ue
	if u, perr := url.Parse(ue.URL); perr == nil {
		u.RawQuery, u.ForceQuery, u.Fragment, u.User = "", false, "", nil
		shown.URL = u.String()
	} else {
		shown.URL = "(unparsable URL)"
	}
	return strings.Replace(err.Error(), ue.Error(), shown.Error(), 1)
}

// validProviderUserID reports whether v is an id the provider really gave: GitHub's is a positive
// number (goth turns a missing or null id into "0"), Google's a non-empty string of visible ASCII
// (at most 255, OpenID Connect's "sub"), never "0". Anything else is no id at all.
func validProviderUserID(provider, v string) bool {
	if provider == "github" {
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && n > 0
	}
	if v == "" || v == "0" || len(v) > 255 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] > '~' {
			return false
		}
	}
	return true
}

// githubPrimaryEmail asks /user/emails for the primary, verified address.
func (o *OAuth) githubPrimaryEmail(ctx context.Context, p *github.Provider, token string) (string, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, orDefault(o.providers.GitHub.EmailUrl, github.EmailURL), nil)
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/vnd.github+json")
	res, err := p.Client().Do(req)
	if err != nil {
		return "", false, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", false, fmt.Errorf("github emails: %d", res.StatusCode)
	}
	var list []struct {
		Email    string `json:"email"`
		Primary  bool   `json:"primary"`
		Verified bool   `json:"verified"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&list); err != nil {
		return "", false, err
	}
	for _, e := range list {
		if e.Primary {
			return e.Email, e.Verified, nil
		}
	}
	return "", false, nil
}

// spend records the state as used; a second callback with it is refused.
func (o *OAuth) spend(ctx context.Context, state string) error {
	sum := sha256.Sum256([]byte(state))
	res, err := o.svc.db.NewInsert().Model(&spentState{StateHash: sum[:]}).On("CONFLICT DO NOTHING").Exec(ctx)
	if err != nil {
		return fmt.Errorf("spend oauth state: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return &flowError{"invalid_state"}
	}
	_, _ = o.svc.db.NewDelete().Model((*spentState)(nil)).Where("spent_at < now() - interval '1 day'").Exec(ctx)
	return nil
}

type spentState struct {
	bun.BaseModel `bun:"table:oauth_spent_states"`
	StateHash     []byte    `bun:"state_hash,pk"`
	SpentAt       time.Time `bun:"spent_at,nullzero,notnull,default:current_timestamp"`
}

// identity is a user's link to an external provider account.
type identity struct {
	bun.BaseModel `bun:"table:user_identities"`

	ID             int64     `bun:"id,pk,autoincrement"`
	UserID         int64     `bun:"user_id,notnull"`
	Provider       string    `bun:"provider,notnull"`
	ProviderUserID string    `bun:"provider_user_id,notnull"`
	Email          string    `bun:"email,notnull"`
	EmailVerified  bool      `bun:"email_verified,notnull"`
	CreatedAt      time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
}

// SignInExternal signs in the account of a provider identity: its linked user; else, for a
// verified provider email, the account with that email if its own email is proven (linked), or a
// new account. An unverified provider email (email_unverified) or an unproven account email
// (account_exists) neither links nor creates. A deleted account's identity is unlinked and signs up
// afresh. Concurrent first sign-ins retry once after a unique violation, so all reach one account.
// An account with TOTP on stops at the MFA step (LoginResult.MFARequired).
func (s *Service) SignInExternal(ctx context.Context, id Identity, c Client) (*LoginResult, error) {
	display := providerDisplay(id.Provider)
	got, err := s.signInExternalTx(ctx, id, true)
	if errors.Is(err, errLostRace) {
		got, err = s.signInExternalTx(ctx, id, false)
	}
	if err != nil {
		return nil, err
	}
	u, created, linked := got.user, got.created, got.linked
	if created {
		s.ProvisionFirstResource(ctx, u)
	}
	res, err := s.beginSignIn(ctx, u, display, c, map[string]any{"linked": linked, "created": created})
	if err != nil {
		return nil, err
	}
	if res.AuthResult != nil {
		res.User.Provider, res.User.ProviderUserID = display, id.ProviderUserID
	}
	return res, nil
}

// errLostRace: a concurrent sign-in committed the account or the identity this one was creating.
var errLostRace = errors.New("a concurrent sign-in created the account or the identity")

// signInExternalTx is one attempt of SignInExternal, in one transaction. With retry, losing the
// race to create the account or the identity is errLostRace (the caller tries again); without, the
// account's email taken is account_exists and the identity taken an error.
func (s *Service) signInExternalTx(ctx context.Context, id Identity, retry bool) (externalSignIn, error) {
	display := providerDisplay(id.Provider)
	var out externalSignIn
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		out = externalSignIn{}
		existing := new(identity)
		err := tx.NewSelect().Model(existing).Where("provider = ?", id.Provider).Where("provider_user_id = ?", id.ProviderUserID).Scan(ctx)
		switch {
		case err == nil:
			owner, err := s.liveUser(ctx, tx, existing.UserID)
			if err != nil || owner != nil {
				out.user = owner
				return err
			}
			if err := s.unlinkDeleted(ctx, tx, existing); err != nil {
				return err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("find identity: %w", errors.Join(fault.ErrUnavailable, err))
		}
		if strings.TrimSpace(id.Email) == "" {
			return &flowError{"email_missing"}
		}
		email, err := emailaddr.Normalize(id.Email)
		if err != nil {
			// A provider's address with a display name, quotes or comments would be stored as
			// typed and dodge the uniqueness of the address inside it.
			return &flowError{"email_invalid"}
		}
		match, err := s.findByEmail(ctx, tx, email)
		if err != nil {
			return err
		}
		switch {
		case !id.EmailVerified:
			return &flowError{"email_unverified"}
		case match != nil && match.EmailVerifiedAt != nil:
			out.user, out.linked = match, true
		case match != nil:
			return &flowError{"account_exists"}
		default:
			now := time.Now()
			fresh := &User{Account: db.Account{Email: email, FullName: firstNonEmpty(providerName(id.Name), email), Role: authn.RoleUser, SecurityStamp: 1, EmailVerifiedAt: &now}}
			if _, err := tx.NewInsert().Model(fresh).Returning("?Columns").Exec(ctx); err != nil {
				if db.IsUniqueViolation(err) {
					if retry {
						// Created meanwhile: by a concurrent sign-in with this identity (the next
						// attempt finds it) or a registration (account_exists then).
						return errLostRace
					}
					return &flowError{"account_exists"} // registered meanwhile, its email not proven
				}
				return fmt.Errorf("create user: %w", err)
			}
			out.user, out.created = fresh, true
		}
		if _, err := tx.NewInsert().Model(&identity{UserID: out.user.ID, Provider: id.Provider, ProviderUserID: id.ProviderUserID,
			Email: email, EmailVerified: id.EmailVerified}).Exec(ctx); err != nil {
			if retry && db.IsUniqueViolation(err) {
				return errLostRace // linked meanwhile by a concurrent sign-in: the next attempt finds it
			}
			return fmt.Errorf("link identity: %w", err)
		}
		action := "user.identity.linked"
		if out.created {
			action = "user.registered"
		}
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: action, ActorUserID: audit.Int64(out.user.ID), TargetType: "user",
			TargetID: fmt.Sprint(out.user.ID), Details: map[string]any{"provider": display, "email": email}})
	})
	return out, err
}

// externalSignIn is what one attempt of SignInExternal reached.
type externalSignIn struct {
	user            *User
	created, linked bool
}

// liveUser is the account with id, or nil when it is missing or deleted.
func (s *Service) liveUser(ctx context.Context, db bun.IDB, id int64) (*User, error) {
	u := new(User)
	err := db.NewSelect().Model(u).Where("id = ?", id).Where("deleted_at IS NULL").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find user %d: %w", id, errors.Join(fault.ErrUnavailable, err))
	}
	return u, nil
}

// unlinkDeleted removes the identity of a deleted account, so that the provider account it names
// is free to sign up again; the deleted account keeps everything else (its audit trail, its
// resources being deprovisioned).
func (s *Service) unlinkDeleted(ctx context.Context, tx bun.Tx, gone *identity) error {
	if _, err := tx.NewDelete().Model(gone).WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("unlink identity of deleted user %d: %w", gone.UserID, err)
	}
	return s.audit.RecordTx(ctx, tx, audit.Event{Action: "user.identity.unlinked", UserID: audit.Int64(gone.UserID),
		TargetType: "user", TargetID: fmt.Sprint(gone.UserID),
		Details: map[string]any{"provider": providerDisplay(gone.Provider), "reason": "user deleted"}})
}

// providerDisplay is the provider's name as the API shows it ("GitHub", "Google").
func providerDisplay(p string) string {
	switch p {
	case "github":
		return "GitHub"
	case "google":
		return "Google"
	}
	return p
}

// providerName is the name an identity provider gives, as a fullName: the characters a typed
// fullName may not hold (displaytext.Deceptive: control, bidi, invisible format) dropped, since the
// provider's profile is not ours to refuse, and cut to the 200 characters a typed one may have.
func providerName(s string) string {
	s = strings.TrimSpace(strings.Map(func(r rune) rune {
		if displaytext.Deceptive(r) {
			return -1
		}
		return r
	}, s))
	if r := []rune(s); len(r) > 200 {
		s = strings.TrimSpace(string(r[:200]))
	}
	return s
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
