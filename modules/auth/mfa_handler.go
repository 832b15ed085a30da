package auth

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
)

type mfaInput struct {
	Body struct {
		_        struct{} `additionalProperties:"true"`
		MFAToken string   `json:"mfaToken" minLength:"1" maxLength:"200" doc:"The mfaToken of the sign-in's answer."`
		Code     string   `json:"code" minLength:"1" maxLength:"64" example:"123456" doc:"The current six-digit code of the authenticator app, or one of the recovery codes."`
	}
}

type codeInput struct {
	Body struct {
		_    struct{} `additionalProperties:"true"`
		Code string   `json:"code" minLength:"1" maxLength:"64" example:"123456" doc:"A current six-digit code of the authenticator app (where said: or a recovery code)."`
	}
}

// StepUpResult says until when the session counts as having passed its second factor recently.
type StepUpResult struct {
	MFAAt      time.Time `json:"mfaAt" doc:"When the session passed the second factor (now)."`
	ValidUntil time.Time `json:"validUntil" doc:"mfaAt + Auth:StepUpMinutes: until then database passwords may be revealed."`
}

func (h *Handler) registerMFA(api *httpx.API) {
	tags := []string{"MFA"}
	httpx.Register(api, httpx.Public, huma.Operation{
		OperationID: "completeMfa", Method: http.MethodPost, Path: "/api/auth/mfa", Tags: []string{"Auth"},
		Summary: "Complete a sign-in with the second factor",
		Description: "Completes a sign-in that answered `mfaRequired` with a TOTP or recovery code. A wrong code is a 401 that " +
			"keeps the mfaToken.",
		Errors: []int{http.StatusUnauthorized},
		Responses: map[string]*huma.Response{"401": {Description: "The mfaToken is unknown, expired or spent, or the code is " +
			"wrong. No `WWW-Authenticate`: the credentials travel in the body."}},
	}, func(ctx context.Context, in *mfaInput) (*httpx.Response[AuthResult], error) {
		res, err := h.svc.CompleteMFA(ctx, in.Body.MFAToken, in.Body.Code, clientOf(ctx))
		if err != nil {
			return nil, err
		}
		return httpx.OK("Signed in", *res), nil
	})

	httpx.Register(api, httpx.Authenticated, huma.Operation{
		OperationID: "startTotp", Method: http.MethodPost, Path: "/api/me/mfa/totp", Tags: tags,
		Summary: "Start TOTP enrolment",
		Description: "Makes a new TOTP secret and answers it once with its `otpauth://` URI; not in force until verified. 409 " +
			"when TOTP is already on.",
		DefaultStatus: http.StatusCreated, Errors: []int{http.StatusConflict},
	}, func(ctx context.Context, _ *optionalBody) (*httpx.Response[TOTPEnrolment], error) {
		e, err := h.svc.StartTOTP(ctx, authn.FromContext(ctx))
		if err != nil {
			return nil, err
		}
		return httpx.Created("Scan the otpauth URI with an authenticator app, then verify a code", *e), nil
	})

	httpx.Register(api, httpx.Authenticated, huma.Operation{
		OperationID: "verifyTotp", Method: http.MethodPost, Path: "/api/me/mfa/totp/verify", Tags: tags,
		Summary: "Turn TOTP on with a code",
		Description: "Turns TOTP on with a code of the enrolment's secret; answers ten recovery codes, once. 409 without an " +
			"enrolment, when on, or when the enrolment was started again meanwhile (its secret replaced).",
		Errors: []int{http.StatusConflict},
	}, func(ctx context.Context, in *codeInput) (*httpx.Response[RecoveryCodes], error) {
		codes, err := h.svc.ConfirmTOTP(ctx, authn.FromContext(ctx), in.Body.Code)
		if err != nil {
			return nil, err
		}
		return httpx.OK("TOTP is on; keep the recovery codes somewhere safe", *codes), nil
	})

	httpx.Register(api, httpx.Authenticated, huma.Operation{
		OperationID: "disableTotp", Method: http.MethodDelete, Path: "/api/me/mfa/totp", Tags: tags,
		Summary:     "Turn TOTP off",
		Description: "Takes a current code or a recovery code; deletes the secret and the recovery codes. A wrong code: 400 on `code`; TOTP not on: 409.",
		Errors:      []int{http.StatusConflict},
	}, func(ctx context.Context, in *codeInput) (*httpx.Response[httpx.NoData], error) {
		if err := h.svc.DisableTOTP(ctx, authn.FromContext(ctx), in.Body.Code); err != nil {
			return nil, err
		}
		return httpx.Done("TOTP is off"), nil
	})

	httpx.Register(api, httpx.Authenticated, huma.Operation{
		OperationID: "stepUpMfa", Method: http.MethodPost, Path: "/api/me/mfa/step-up", Tags: tags,
		Summary: "Pass the second factor again in this session",
		Description: "Takes a current or recovery code; the session may then reveal passwords for `Auth:StepUpMinutes`. 409 " +
			"when TOTP is off.",
		Errors: []int{http.StatusConflict},
	}, func(ctx context.Context, in *codeInput) (*httpx.Response[StepUpResult], error) {
		at, err := h.svc.StepUp(ctx, authn.FromContext(ctx), in.Body.Code)
		if err != nil {
			return nil, err
		}
		return httpx.OK("Second factor passed", StepUpResult{MFAAt: at,
			ValidUntil: at.Add(time.Duration(h.svc.own.StepUpMinutes) * time.Minute)}), nil
	})
}
