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
		Password     string         `json:"password" minLength:"8" maxLength:"512" doc:"8–128 characters (Unicode code points) once NFKC-normalised, the form that is hashed and checked at sign-in, so a composed or decomposed accent and a fullwidth or ASCII letter are the same password; 8–512 as sent. Not among the 10,000 most common passwords." example:"correct horse battery staple"`
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
		Password string   `json:"password" minLength:"1" maxLength:"512" doc:"Compared in its NFKC form (a hash made before passwords were normalised also accepts the text as typed, and is then replaced). At most 512 code points as sent." example:"correct horse battery staple"`
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
		NewPassword string   `json:"newPassword" minLength:"8" maxLength:"512" doc:"Same rules as the password of POST /api/auth/register: 8–128 characters (Unicode code points) once NFKC-normalised, 8–512 as sent, not among the 10,000 most common passwords." example:"another long passphrase"`
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
		Summary:       "Register with email and password",
		Description:   "Creates a local account, provisions its first database and signs it in: a new session, with a `refreshToken` (POST /api/auth/refresh). A `role` or `id` in the body is ignored.",
		DefaultStatus: http.StatusCreated, Errors: []int{http.StatusConflict},
	}, func(ctx context.Context, in *registerInput) (*httpx.Response[RegisterResult], error) {
		if err := h.limiter.Check(ctx, "Register", httpx.ClientIP(ctx)); err != nil {
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
		Description: "A wrong password and an unknown email get the same 401. An email that is not a bare address is a 400. " +
			"A correct password starts a session (`refreshToken`, see POST /api/auth/refresh); for an account with TOTP on it answers " +
			"`mfaRequired: true` and an `mfaToken` instead, which POST /api/auth/mfa completes with a code. " +
			"Lockout: failed password checks are counted per email (known or not) before the password is hashed; after " +
			"`Auth:LockoutThreshold` failures (default 10), each further attempt must wait a delay that doubles with every failure " +
			"(`Auth:LockoutDelaySeconds`, default 1 s, then 2 s, 4 s…, at most `Auth:LockoutWindowMinutes`), and one sent earlier is a 429 with `Retry-After`, unchecked and " +
			"uncounted, the same for every email. Failures are forgotten `Auth:LockoutWindowMinutes` (default 15) after the last one, " +
			"or at a successful sign-in.",
		Errors: []int{http.StatusUnauthorized},
		Responses: map[string]*huma.Response{"401": {Description: "Wrong email or password. It carries no `WWW-Authenticate`: " +
			"the credentials travel in the body, which is no HTTP authentication scheme, so no challenge applies " +
			"(`Bearer` would ask for a token, which this operation does not take)."},
			"429": {Description: "`RateLimit:Login` (per IP and email) reached, or the account's failed attempts hold this one back " +
				"(the lockout): wait `Retry-After` seconds."}},
	}, func(ctx context.Context, in *loginInput) (*httpx.Response[LoginResult], error) {
		if err := h.limiter.Check(ctx, "Login", httpx.ClientIP(ctx)+"|"+normalizeEmail(in.Body.Email)); err != nil {
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
		Description: "Always answers 200 with the same message (400 if the email is not a bare address), whether the email is unknown or " +
			"an account's, with a password or without. A known account receives `{Frontend:BaseUrl}/auth/reset-password#token=<TOKEN>` " +
			"by mail, valid for 30 minutes and once: to choose a new password, or, for an account without a password (one that signs in " +
			"only through GitHub or Google), to set one; see POST /api/auth/reset-password for what completing it does. " +
			"Limits: `RateLimit:ForgotPassword` (default 3 per hour) counts the mails per email address and is silent: past it the " +
			"answer is the same 200 and nothing is mailed (so nobody can lock an owner out of recovery by spending it, nor learn " +
			"anything from it); `RateLimit:ForgotPasswordPerIp` (default 20 per hour, per client IP) answers 429 with `Retry-After`.",
	}, func(ctx context.Context, in *forgotInput) (*httpx.Response[httpx.NoData], error) {
		if err := h.limiter.Check(ctx, "ForgotPasswordPerIp", httpx.ClientIP(ctx)); err != nil {
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
		Description: "Spends the token and every other reset token of the account; every access token issued before is " +
			"refused from then on. The reset proves the account's email (the link reached it), so signing in with GitHub or " +
			"Google with that verified email links to the account afterwards (`emailVerified` becomes true in GET /api/me). An account " +
			"without a password gets its first one. In the same transaction every GitHub or Google identity linked to the account whose " +
			"email the provider had not verified, or whose email is not the account's, is unlinked (audited as `user.identity.unlinked`, " +
			"naming the providers): whoever made the account through someone else's unverified provider email can no longer sign in to it. " +
			"A reset that so takes the account over (it proves an email the account had not proven, `emailVerified` false before, or " +
			"unlinks identities) also revokes every AI key of the account at once, and gives every database of the account (not " +
			"`Deleting`/`Deleted`) a new owner password in the same transaction; before answering, the new passwords are set on the " +
			"engines and the owner roles' open sessions are ended (bounded by 10 s; a database whose engine does not answer gets its " +
			"new password as soon as it does, and revealing its password is a 409 with `Retry-After` until then), so a database " +
			"password revealed before no longer logs in; on PostgreSQL `CONNECT` on the database granted from inside it to PUBLIC or to " +
			"other roles (another tenant's, say) is revoked too, as pausing does, and their sessions there ended (the database's own " +
			"access credentials keep theirs). The answer's message says what was revoked and changed. A reset of an " +
			"account whose email was proven (and that unlinks nothing) leaves its keys and database passwords alone. " +
			"A link mailed to an address the account no " +
			"longer has (an admin changed the email, which spends the account's links), or an unknown, expired or already " +
			"spent token, is a 400 on the `token` field.",
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
		Description: "401 when the token is invalid or expired, or its account is gone: deleted (even while this request was in flight) " +
			"or its password reset since the token was issued. `emailVerified` says whether the account's email is proven (see " +
			"POST /api/auth/reset-password); only a completed reset or a sign-up from a provider's verified email sets it.",
	}, func(ctx context.Context, _ *struct{}) (*httpx.Response[UserView], error) {
		u, err := h.svc.Me(ctx, authn.FromContext(ctx).UserID)
		if err != nil {
			return nil, err
		}
		return httpx.OK("OK", *u), nil
	})
}
