package databases

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
)

type rotateInput struct {
	ID   int64 `path:"id" minimum:"1" doc:"databaseInstanceId"`
	Body struct {
		_                  struct{} `additionalProperties:"true"`
		GracePeriodSeconds *int     `json:"gracePeriodSeconds,omitempty" minimum:"0" maximum:"86400" doc:"How long the old password keeps working (its open sessions too); default: the setting Databases:RotationGraceSeconds."`
	}
}

func (h *Handler) registerRotation(api *httpx.API) {
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "rotateMyDatabasePassword",
		Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/me/databases/{id}/rotate-password", Tags: []string{"Databases"}, Summary: "Rotate a database's password",
		Description: "A new password (of the other of its two logins) works at once; the old one until the grace period ends. " +
			"Limited by `RateLimit:PasswordReveal` and audited. 409 unless Active or Paused, or while a rotation is being set; " +
			"502 when the engine failed (finished in the background).",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusForbidden, http.StatusBadGateway}, Responses: engineFailedNoData},
		func(ctx context.Context, in *rotateInput) (*httpx.Response[Rotated], error) {
			uid := authn.FromContext(ctx).UserID
			if err := authn.GuardSecret(ctx, h.limiter); err != nil {
				return nil, err
			}
			grace := h.svc.cfg.Databases.RotationGraceSeconds
			if in.Body.GracePeriodSeconds != nil {
				grace = *in.Body.GracePeriodSeconds
			}
			r, err := h.svc.RotatePassword(ctx, in.ID, uid, grace)
			if err != nil {
				return nil, err
			}
			return httpx.OK("Password rotated; the old one works until previousValidUntil", *r), nil
		})
}
