package auth

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
	"provisioner/platform/ratelimit"
	"provisioner/platform/secrets"
)

// Handler serves /api/auth, GET /api/me, the sessions and the second factor.
type Handler struct {
	svc      *Service
	sessions *Sessions
	limiter  *ratelimit.Limiter
	oauth    *OAuth
}

// NewHandler builds the handler.
func NewHandler(svc *Service, sessions *Sessions, limiter *ratelimit.Limiter, oauth *OAuth) *Handler {
	return &Handler{svc: svc, sessions: sessions, limiter: limiter, oauth: oauth}
}

// clientOf is where the request comes from, kept with the session it starts or refreshes.
func clientOf(ctx context.Context) Client {
	return Client{IP: httpx.ClientIP(ctx), UserAgent: httpx.UserAgent(ctx)}
}

type registerInput struct {
	Body struct {
		_            struct{}       `additionalProperties:"true"`
		FullName     httpx.FullName `json:"fullName" example:"Ada Lovelace"`
		Organization string         `json:"organization,omitempty" maxLength:"200" example:"Analytical Engines Ltd"`
		Email        string         `json:"email" format:"idn-email" maxLength:"254" example:"ada@example.com"`
		Password     string         `json:"password" minLength:"8" maxLength:"512" doc:"8–128 characters once NFKC-normalised (8–512 as sent), not among the 10,000 most common passwords." example:"correct horse battery staple"`
	}
}

// Resolve checks what the schema cannot, alongside it: a 400 lists a password whose NFKC form is
// too short, too long or common (secrets.PasswordProblem), a fullName
// of white space only (stored trimmed, it would be the empty name minLength refuses), or control,
// bidi or invisible format characters in fullName or organization (httpx.DisplayTextProblem), with
// the schema's errors.
func (in *registerInput) Resolve(huma.Context) []error {
	errs := passwordProblem("password", in.Body.Password)
	return append(errs, httpx.PersonTexts((*string)(&in.Body.FullName), &in.Body.Organization)...)
}

type loginInput struct {
	Body struct {
		_        struct{} `additionalProperties:"true"`
		Email    string   `json:"email" format:"idn-email" maxLength:"254" example:"ada@example.com"`
		Password string   `json:"password" minLength:"1" maxLength:"512" doc:"Compared in its NFKC form." example:"correct horse battery staple"`
	}
}

type forgotInput struct {
	Body struct {
		_     struct{} `additionalProperties:"true"`
		Email string   `json:"email" format:"idn-email" maxLength:"254" example:"ada@example.com"`
	}
}

type resetInput struct {
	Body struct {
		_           struct{} `additionalProperties:"true"`
		Token       string   `json:"token" minLength:"1" maxLength:"200" doc:"The token from the reset link's fragment."`
		NewPassword string   `json:"newPassword" minLength:"8" maxLength:"512" doc:"Same rules as the password of POST /api/auth/register." example:"another long passphrase"`
	}
}

// Resolve checks what the schema cannot, alongside it.
func (in *resetInput) Resolve(huma.Context) []error {
	return passwordProblem("newPassword", in.Body.NewPassword)
}

// passwordProblem applies the rules of a new password to its NFKC form (secrets.PasswordProblem).
// An empty one is the schema's to report (missing, or a body that did not decode).
func passwordProblem(field, password string) []error {
	if password == "" {
		return nil
	}
	if msg := secrets.PasswordProblem(password); msg != "" {
		return []error{httpx.Invalid(field, msg)}
	}
	return nil
}

// forgotMessage is the one answer of forgot-password, whether or not the account exists.
const forgotMessage = "If an account exists for this email, a reset link has been sent."

// resetMessage is the answer of a completed reset; one that took the account over says what that did.
func resetMessage(out *ResetOutcome) string {
	msg := "Password changed; sign in with the new password"
	if !out.TakenOver {
		return msg
	}
	msg += ". This reset proved the account's email for the first time (or unlinked sign-ins that did not prove it), so " +
		"whoever used the account before may not have been you"
	if _, ok := out.Revoked["aiKeys"]; ok {
		msg += ": every AI key of the account was revoked; create new ones"
	}
	if _, ok := out.Revoked["databasePasswordsRotated"]; ok {
		msg += ". The passwords of the account's databases were changed, what was granted from inside them to other roles revoked, " +
			"and their open sessions ended: " +
			"reveal the new ones (a database whose engine does not answer now gets its new password as soon as it does)"
	}
	return msg
}

// Register implements httpx.Routes.
func (h *Handler) Register(api *httpx.API) {
	tags := []string{"Auth"}
	httpx.Register(api, httpx.Public, huma.Operation{
		OperationID: "register", Method: http.MethodPost, Path: "/api/auth/register", Tags: tags,
		Summary: "Register with email and password",
		Description: "Creates an account, provisions its first database and starts a session. A `role` or `id` in the body is " +
			"ignored.",
		DefaultStatus: http.StatusCreated, Errors: []int{http.StatusConflict},
	}, func(ctx context.Context, in *registerInput) (*httpx.Response[RegisterResult], error) {
		if err := h.limiter.Check(ctx, "Register", httpx.ClientKey(ctx)); err != nil {
			return nil, err
		}
		res, err := h.svc.Register(ctx, RegisterInput{
			FullName: string(in.Body.FullName), Organization: in.Body.Organization, Email: in.Body.Email, Password: in.Body.Password,
			Client: clientOf(ctx),
		})
		if err != nil {
			return nil, err
		}
		return httpx.Created("User registered successfully", *res), nil
	})

	httpx.Register(api, httpx.Public, huma.Operation{
		OperationID: "login", Method: http.MethodPost, Path: "/api/auth/login", Tags: tags,
		Summary: "Sign in with email and password",
		Description: "Starts a session, or answers `mfaRequired` with an `mfaToken` for POST /api/auth/mfa. 429 after " +
			"`Auth:LockoutThreshold` failures per email (a doubling delay).",
		Errors: []int{http.StatusUnauthorized},
		Responses: map[string]*huma.Response{"401": {Description: "Wrong email or password; no `WWW-Authenticate` (the credentials travel in the body)."},
			"429": {Description: "`RateLimit:LoginPerIp` (per IP) or `RateLimit:Login` (per IP and email) reached, or the lockout holds this attempt back."}},
	}, func(ctx context.Context, in *loginInput) (*httpx.Response[LoginResult], error) {
		if err := h.limiter.Check(ctx, "LoginPerIp", httpx.ClientKey(ctx)); err != nil {
			return nil, err
		}
		if err := h.limiter.Check(ctx, "Login", httpx.ClientKey(ctx)+"|"+normalizeEmail(in.Body.Email)); err != nil {
			return nil, err
		}
		res, err := h.svc.Login(ctx, LoginInput{Email: in.Body.Email, Password: in.Body.Password, Client: clientOf(ctx)})
		if err != nil {
			return nil, err
		}
		msg := "Signed in"
		if res.MFARequired {
			msg = "A second factor is required: send a TOTP or recovery code with the mfaToken to POST /api/auth/mfa"
		}
		return httpx.OK(msg, *res), nil
	})

	httpx.Register(api, httpx.Public, huma.Operation{
		OperationID: "forgotPassword", Method: http.MethodPost, Path: "/api/auth/forgot-password", Tags: tags,
		Summary: "Ask for a password reset link",
		Description: "Always the same 200; a known account is mailed a reset link valid 30 minutes. " +
			"`RateLimit:ForgotPasswordPerIp` answers 429.",
	}, func(ctx context.Context, in *forgotInput) (*httpx.Response[httpx.NoData], error) {
		if err := h.limiter.Check(ctx, "ForgotPasswordPerIp", httpx.ClientKey(ctx)); err != nil {
			return nil, err
		}
		// The email's budget of mails is silent (no headers, no 429): past it the answer is the same
		// and nothing is mailed, so nobody can lock an owner out of recovery or learn anything by it.
		perEmail, err := h.limiter.Take(ctx, "ForgotPassword", normalizeEmail(in.Body.Email))
		if err != nil {
			return nil, err
		}
		if err := h.svc.ForgotPassword(ctx, in.Body.Email, !perEmail.Reached); err != nil {
			return nil, err
		}
		return httpx.Done(forgotMessage), nil
	})

	httpx.Register(api, httpx.Public, huma.Operation{
		OperationID: "resetPassword", Method: http.MethodPost, Path: "/api/auth/reset-password", Tags: tags,
		Summary: "Choose a new password with a reset token",
		Description: "Sets the password; earlier tokens are refused. A reset that proves the email may also revoke AI keys and " +
			"change database passwords. A bad token: 400 on `token`.",
	}, func(ctx context.Context, in *resetInput) (*httpx.Response[httpx.NoData], error) {
		out, err := h.svc.ResetPassword(ctx, in.Body.Token, in.Body.NewPassword)
		if err != nil {
			return nil, err
		}
		return httpx.Done(resetMessage(out)), nil
	})

	h.registerOAuth(api)
	h.registerSessions(api)
	h.registerMFA(api)

	httpx.Register(api, httpx.Authenticated, huma.Operation{
		OperationID: "getMe", Method: http.MethodGet, Path: "/api/me", Tags: tags,
		Summary: "The authenticated user",
		Description: "401 when the token is invalid or expired, or its account is gone. `emailVerified` says whether the " +
			"account's email is proven.",
	}, func(ctx context.Context, _ *struct{}) (*httpx.Response[UserView], error) {
		u, err := h.svc.Me(ctx, authn.FromContext(ctx).UserID)
		if err != nil {
			return nil, err
		}
		return httpx.OK("OK", *u), nil
	})
}
