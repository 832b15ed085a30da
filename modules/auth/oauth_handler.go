package auth

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/audit"
	"provisioner/platform/httpx"
)

type oauthLoginInput struct {
	Provider  string `path:"provider" doc:"github or google (any case)." example:"github"`
	ReturnURL string `query:"returnUrl" maxLength:"2000" doc:"Where the frontend wants to land after sign-in; kept only when its origin is one of Frontend:Origins and its path one of Frontend:ReturnPaths (no encoded slash, dot segment or //), else ignored."`
}

type oauthCallbackInput struct {
	Provider         string `path:"provider"`
	Code             string `query:"code" maxLength:"4096"`
	State            string `query:"state" maxLength:"512"`
	Error            string `query:"error" maxLength:"200"`
	ErrorDescription string `query:"error_description" maxLength:"2000"`
	Flow             string `cookie:"oauth_flow" doc:"The signed flow cookie set by the login route (Server:PublicUrl http)."`
	HostFlow         string `cookie:"__Host-oauth_flow" doc:"The same cookie when Server:PublicUrl is https."`
}

type redirect struct {
	Status       int
	Location     string      `header:"Location"`
	SetCookie    http.Cookie `header:"Set-Cookie"`
	CacheControl string      `header:"Cache-Control"`
}

// flowCookie is the flow cookie holding value. Served over https it is __Host-oauth_flow: Secure,
// Path=/ and no Domain, so no other host of the zone (a sibling subdomain) can set or replace it.
func (h *Handler) flowCookie(value string, maxAge int) http.Cookie {
	if h.secureFlow() {
		return http.Cookie{Name: hostStateCookie, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
			SameSite: http.SameSiteLaxMode, Secure: true}
	}
	return http.Cookie{Name: stateCookie, Value: value, Path: "/api/auth", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteLaxMode}
}

// secureFlow reports whether Server:PublicUrl is https (the flow cookie is then __Host-oauth_flow).
func (h *Handler) secureFlow() bool {
	return strings.HasPrefix(strings.ToLower(h.oauth.cfg.Server.PublicUrl), "https://")
}

// flowOf is the flow cookie the callback reads: the __Host- one over https (an oauth_flow cookie
// a sibling host planted is ignored), oauth_flow otherwise.
func (h *Handler) flowOf(in *oauthCallbackInput) string {
	if h.secureFlow() {
		return in.HostFlow
	}
	return in.Flow
}

// frontendURL is the redirect target: an allowed returnUrl, else {Frontend:BaseUrl}/auth/callback,
// with the outcome in the fragment (never the query, so it stays out of logs and Referer).
func (h *Handler) frontendURL(returnURL string, fragment url.Values) string {
	base := returnURL
	if base == "" {
		base = strings.TrimRight(h.oauth.cfg.Frontend.BaseUrl, "/") + "/auth/callback"
	}
	return base + "#" + fragment.Encode()
}

func (h *Handler) registerOAuth(api *httpx.API) {
	tags := []string{"Auth"}
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "oauthLogin", Method: http.MethodGet,
		Path: "/api/auth/login/{provider}", Tags: tags, Summary: "Start signing in with GitHub or Google",
		Description: "302 to the provider with a `state` bound to a signed, HttpOnly, SameSite=Lax cookie valid 10 minutes (`__Host-oauth_flow` when " +
			"`Server:PublicUrl` is https), and PKCE (S256). " +
			"The provider sends the browser back to `{Server:PublicUrl}/api/auth/callback/{provider}`. Unknown or unconfigured provider: 404.",
		DefaultStatus: http.StatusFound, Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *oauthLoginInput) (*redirect, error) {
			name := h.oauth.providerName(in.Provider)
			if name == "" {
				return nil, httpx.NotFound("Unknown or unconfigured identity provider")
			}
			to, cookie, err := h.oauth.Begin(name, in.ReturnURL)
			if err != nil {
				return nil, err
			}
			return &redirect{Status: http.StatusFound, Location: to, SetCookie: h.flowCookie(cookie, int(StateTTL.Seconds())), CacheControl: "no-store"}, nil
		})

	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "oauthCallback", Method: http.MethodGet,
		Path: "/api/auth/callback/{provider}", Tags: tags, Summary: "Finish signing in with GitHub or Google",
		Description: "Signs the user in, then 302 to `{Frontend:BaseUrl}/auth/callback` (or the allowed `returnUrl`) with the " +
			"tokens, `mfa_required` or `error=<code>` in the fragment.",
		DefaultStatus: http.StatusFound, Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *oauthCallbackInput) (*redirect, error) {
			name := h.oauth.providerName(in.Provider)
			if name == "" {
				return nil, httpx.NotFound("Unknown or unconfigured identity provider")
			}
			q := url.Values{}
			for k, v := range map[string]string{"code": in.Code, "state": in.State, "error": in.Error} {
				if v != "" {
					q.Set(k, v)
				}
			}
			res, returnURL, err := h.oauth.Finish(ctx, name, h.flowOf(in), q, clientOf(ctx))
			out := &redirect{Status: http.StatusFound, SetCookie: h.flowCookie("", -1), CacheControl: "no-store"}
			var fe *flowError
			switch {
			case errors.As(err, &fe):
				// A refused sign-in is audited like a refused password (CONTRACT §8), with the
				// provider and the code the browser gets; no provider text. It is bounded as the
				// password's unknown-email failures are: by the per-IP limit of every route.
				h.svc.audit.Try(ctx, audit.Event{Action: "user.login.failed", TargetType: "user",
					Details: map[string]any{"provider": providerDisplay(name), "reason": fe.Code}})
				out.Location = h.frontendURL(returnURL, url.Values{"error": {fe.Code}})
			case err != nil:
				// RFC 6749 §4.1.2.1's codes: a dependency that is down is not a failed sign-in.
				code := "server_error"
				if httpx.FromError(err).Status == http.StatusServiceUnavailable {
					code = "temporarily_unavailable"
				}
				h.svc.log.ErrorContext(ctx, "oauth sign-in failed", "provider", name, "code", code, "error", err.Error())
				out.Location = h.frontendURL(returnURL, url.Values{"error": {code}})
			case res.MFARequired:
				out.Location = h.frontendURL(returnURL, url.Values{"mfa_required": {"true"}, "mfa_token": {res.MFAToken},
					"mfa_expires_at": {res.MFAExpiresAt.UTC().Format(time.RFC3339)}, "provider": {providerDisplay(name)}})
			default:
				out.Location = h.frontendURL(returnURL, url.Values{"access_token": {res.AccessToken},
					"expires_at": {res.ExpiresAt.UTC().Format(time.RFC3339)}, "provider": {res.Provider},
					"refresh_token": {res.RefreshToken}, "refresh_expires_at": {res.RefreshExpiresAt.UTC().Format(time.RFC3339)}})
			}
			return out, nil
		})
}
