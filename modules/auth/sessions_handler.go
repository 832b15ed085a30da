package auth

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
)

type refreshInput struct {
	Body struct {
		_            struct{} `additionalProperties:"true"`
		RefreshToken string   `json:"refreshToken" minLength:"1" maxLength:"200" doc:"The refreshToken of the sign-in or of the last refresh."`
	}
}

type sessionIDInput struct {
	ID int64 `path:"id" minimum:"1" doc:"The session's id."`
}

type userSessionsInput struct {
	ID int64 `path:"id" minimum:"1" doc:"The user's id."`
	httpx.PageQuery
}

type userIDInput struct {
	ID int64 `path:"id" minimum:"1" doc:"The user's id."`
}

// optionalBody is the input of a POST that takes no body: one sent anyway must be a JSON object
// (a malformed one is a 400, never ignored).
type optionalBody struct {
	Body *struct {
		_ struct{} `additionalProperties:"true"`
	} `required:"false"`
}

// Ended is how many sessions a request ended.
type Ended struct {
	Ended int `json:"ended" example:"2" doc:"How many live sessions were ended."`
}

func (h *Handler) registerSessions(api *httpx.API) {
	tags := []string{"Sessions"}
	httpx.Register(api, httpx.Public, huma.Operation{
		OperationID: "refreshSession", Method: http.MethodPost, Path: "/api/auth/refresh", Tags: []string{"Auth"},
		Summary: "Trade a refresh token for new tokens",
		Description: "Spends the refresh token for new tokens of the same session; a spent one presented again later ends the " +
			"session (401).",
		Errors: []int{http.StatusUnauthorized},
		Responses: map[string]*huma.Response{"401": {Description: "The refresh token is unknown, expired, spent (reuse), or its " +
			"session ended. No `WWW-Authenticate`: the token travels in the body."}},
	}, func(ctx context.Context, in *refreshInput) (*httpx.Response[AuthResult], error) {
		res, err := h.sessions.Refresh(ctx, in.Body.RefreshToken, clientOf(ctx))
		if err != nil {
			return nil, err
		}
		return httpx.OK("Refreshed", *res), nil
	})

	httpx.Register(api, httpx.Authenticated, huma.Operation{
		OperationID: "logout", Method: http.MethodPost, Path: "/api/auth/logout", Tags: []string{"Auth"},
		Summary:     "Sign out: end this session",
		Description: "Ends the session of the bearer token, on every replica.",
	}, func(ctx context.Context, _ *optionalBody) (*httpx.Response[httpx.NoData], error) {
		if err := h.sessions.Logout(ctx, authn.FromContext(ctx)); err != nil {
			return nil, err
		}
		return httpx.Done("Signed out"), nil
	})

	httpx.Register(api, httpx.Authenticated, huma.Operation{
		OperationID: "listMySessions", Method: http.MethodGet, Path: "/api/me/sessions", Tags: tags,
		Summary:     "My sign-in sessions",
		Description: "The account's live sessions, newest first; the caller's has `current: true`.",
	}, func(ctx context.Context, _ *struct{}) (*httpx.Response[[]SessionView], error) {
		list, err := h.sessions.List(ctx, authn.FromContext(ctx))
		if err != nil {
			return nil, err
		}
		return httpx.OK("OK", list), nil
	})

	httpx.Register(api, httpx.Authenticated, huma.Operation{
		OperationID: "endMySession", Method: http.MethodDelete, Path: "/api/me/sessions/{id}", Tags: tags,
		Summary:     "End one of my sessions",
		Description: "Its tokens are refused at once, on every replica. Another user's, ended or unknown: 404.",
		Errors:      []int{http.StatusNotFound},
	}, func(ctx context.Context, in *sessionIDInput) (*httpx.Response[httpx.NoData], error) {
		if err := h.sessions.End(ctx, authn.FromContext(ctx), in.ID); err != nil {
			return nil, err
		}
		return httpx.Done("Session ended"), nil
	})

	httpx.Register(api, httpx.Authenticated, huma.Operation{
		OperationID: "endMyOtherSessions", Method: http.MethodDelete, Path: "/api/me/sessions", Tags: tags,
		Summary:     "End all my other sessions",
		Description: "Ends every live session of the account but the current one. Audited as `user.session.ended`.",
	}, func(ctx context.Context, _ *struct{}) (*httpx.Response[Ended], error) {
		n, err := h.sessions.EndOthers(ctx, authn.FromContext(ctx))
		if err != nil {
			return nil, err
		}
		return httpx.OK("Other sessions ended", Ended{Ended: n}), nil
	})

	httpx.Register(api, httpx.AdminOnly, huma.Operation{
		OperationID: "listUserSessions", Method: http.MethodGet, Path: "/api/users/{id}/sessions", Tags: tags,
		Summary:     "A user's sign-in sessions",
		Description: "The user's live sessions, newest first, a page at a time. Unknown or deleted user: 404.",
		Errors:      []int{http.StatusNotFound},
	}, func(ctx context.Context, in *userSessionsInput) (*httpx.Response[httpx.Page[SessionView]], error) {
		items, total, err := h.sessions.ListOf(ctx, in.ID, in.Offset(), in.Limit())
		if err != nil {
			return nil, err
		}
		return httpx.OK("OK", httpx.NewPage(in.PageQuery, items, total)), nil
	})

	httpx.Register(api, httpx.AdminOnly, huma.Operation{
		OperationID: "endUserSessions", Method: http.MethodDelete, Path: "/api/users/{id}/sessions", Tags: tags,
		Summary:     "End all of a user's sessions",
		Description: "Ends every live session of the user, on every replica. Unknown or deleted user: 404.",
		Errors:      []int{http.StatusNotFound},
	}, func(ctx context.Context, in *userIDInput) (*httpx.Response[Ended], error) {
		n, err := h.sessions.EndAllOf(ctx, in.ID)
		if err != nil {
			return nil, err
		}
		return httpx.OK("Sessions ended", Ended{Ended: n}), nil
	})
}
