package aikeys

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
)

type keyUsageInput struct {
	ID int64 `path:"id" minimum:"1"`
	UsageQuery
}

type userUsageInput struct {
	ID int64 `path:"id" minimum:"1"`
	UsageQuery
}

// registerUsage registers the usage routes: a key's for its owner, a user's keys' for admins.
func (h *Handler) registerUsage(api *httpx.API) {
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "getMyAiKeyUsage", Method: http.MethodGet,
		Path: "/api/me/ai-keys/{id}/usage", Tags: []string{"AI keys"}, Summary: "An AI key's usage",
		Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *keyUsageInput) (*httpx.Response[[]Bucket], error) {
			b, err := h.keys.Usage(ctx, authn.FromContext(ctx).UserID, in.ID, in.UsageQuery)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", b), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "getUserAiUsage", Method: http.MethodGet,
		Path: "/api/users/{id}/ai-usage", Tags: []string{"AI keys"}, Summary: "A user's AI usage"},
		func(ctx context.Context, in *userUsageInput) (*httpx.Response[[]Bucket], error) {
			b, err := h.keys.Usage(ctx, in.ID, 0, in.UsageQuery)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", b), nil
		})
}
