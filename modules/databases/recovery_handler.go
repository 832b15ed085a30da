package databases

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
)

type adminRestoreInput struct {
	ID   int64 `path:"id" minimum:"1" doc:"databaseInstanceId"`
	Body *struct {
		_      struct{} `additionalProperties:"true"`
		UserID int64    `json:"userId,omitempty" minimum:"1" doc:"Give the database to this user (default: its owner; required when the owner's account is deleted)."`
	}
}

// restoreDoc is what both restores answer.
const restoreDoc = "Within its recovery window (purgeAt): back Active with its data, password and credentials. 404 once " +
	"the window is over (dropped or being dropped); 409 unless deleted, during another change"

// registerRecovery registers the restores of deleted databases (the owner's and an administrator's).
func (h *Handler) registerRecovery(api *httpx.API) {
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "restoreMyDatabase",
		Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/me/databases/{id}/restore", Tags: []string{"Databases"}, Summary: "Restore a deleted database",
		Description: restoreDoc + " or at `Databases:MaxPerUser`; 502 when the engine failed (finished in the background).",
		Errors:      []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: engineFailed},
		func(ctx context.Context, in *idInput) (*httpx.Response[Item], error) {
			return h.restored(ctx, in.ID, authn.FromContext(ctx).UserID, 0)
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "restoreDatabaseInstance",
		Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/database-instances/{id}/restore", Tags: []string{"Admin: database instances"}, Summary: "Restore a deleted database",
		Description: restoreDoc + ", or when its owner is deleted and no userId is given; no quota. 502 when the engine " +
			"failed (finished in the background).",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: engineFailed},
		func(ctx context.Context, in *adminRestoreInput) (*httpx.Response[Item], error) {
			var to int64
			if in.Body != nil {
				to = in.Body.UserID
			}
			return h.restored(ctx, in.ID, 0, to)
		})
}

// restored answers a restore: 200 when Active, else 502 with the row as stored (Restoring).
func (h *Handler) restored(ctx context.Context, id, userID, toUserID int64) (*httpx.Response[Item], error) {
	inst, o, err := h.svc.Restore(ctx, id, userID, toUserID)
	return h.answer(inst, o, err, false, "Database restored")
}
