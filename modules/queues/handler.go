package queues

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
	"provisioner/platform/ratelimit"
)

// Handler serves /api/me/queues* and /api/queues*.
type Handler struct {
	svc     *Service
	limiter *ratelimit.Limiter
}

// QueueSpaceBody is the body of a create. Exported: the administrators' body embeds it.
type QueueSpaceBody struct {
	_    struct{} `additionalProperties:"true"`
	Name string   `json:"name" minLength:"1" maxLength:"63" pattern:"^[A-Za-z0-9 _.-]+$" doc:"A display name."`
}

type queuesCreateInput struct{ Body QueueSpaceBody }

type queuesAdminCreateInput struct {
	Body struct {
		QueueSpaceBody
		UserID int64 `json:"userId" minimum:"1"`
	}
}

type queuesAdminListInput struct {
	provision.AdminFilter
	Status string `query:"status" enum:"Provisioning,Active,Failed,Deleting,Deleted"`
}

func (in queuesAdminListInput) Filter() (provision.AdminFilter, string) {
	return in.AdminFilter, in.Status
}

const createDoc = "409 at `Queues:MaxPerUser`; 503 without `Queues:ManagementUrl`."

// brokerFailed documents the 502 of the operations that call the broker.
var brokerFailed = httpx.ProviderFailed("The broker failed; `data` as stored.")

// Register implements httpx.Routes.
func (h *Handler) Register(api *httpx.API) {
	tags := []string{"Queues"}
	httpx.RegisterMine(api, huma.Operation{OperationID: "listMyQueueSpaces", Method: http.MethodGet,
		Path: "/api/me/queues", Tags: tags, Summary: "List my queue spaces"}, h.svc.List)
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "createMyQueueSpace", Method: http.MethodPost,
		Path: "/api/me/queues", Tags: tags, Summary: "Create a queue space", Description: createDoc, DefaultStatus: http.StatusCreated,
		Errors: []int{http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable}, Responses: brokerFailed},
		func(ctx context.Context, in *queuesCreateInput) (*httpx.Response[View], error) {
			return h.created(ctx, authn.FromContext(ctx).UserID, in.Body.Name)
		})
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "deleteMyQueueSpace", Method: http.MethodDelete,
		Path: "/api/me/queues/{id}", Tags: tags, Summary: "Delete a queue space",
		Errors: []int{http.StatusNotFound, http.StatusBadGateway, http.StatusServiceUnavailable}, Responses: brokerFailed},
		func(ctx context.Context, in *httpx.IDInput) (*httpx.Response[View], error) {
			return h.deleted(ctx, in.ID, authn.FromContext(ctx).UserID)
		})
	authn.RegisterReveal(api, huma.Operation{OperationID: "revealMyQueueSpacePassword", Method: http.MethodGet,
		Path: "/api/me/queues/{id}/password", Tags: tags, Summary: "Reveal a queue space's password",
		Description: "Limited by `RateLimit:PasswordReveal`; audited.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict, http.StatusForbidden}}, h.limiter, h.svc.Reveal)
	h.registerAdmin(api)
}

func (h *Handler) registerAdmin(api *httpx.API) {
	tags := []string{"Admin: queues"}
	httpx.RegisterAdminList[queuesAdminListInput](api, huma.Operation{OperationID: "listQueueSpaces", Method: http.MethodGet,
		Path: "/api/queues", Tags: tags, Summary: "List queue spaces"}, h.svc.db, func(sp *Space) View { return view(h.svc.cfg, sp) })
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "getQueueSpace", Method: http.MethodGet,
		Path: "/api/queues/{id}", Tags: tags, Summary: "One queue space", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *httpx.IDInput) (*httpx.Response[View], error) {
			sp, err := h.svc.get(ctx, in.ID, 0)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", view(h.svc.cfg, sp)), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "createQueueSpace", Method: http.MethodPost,
		Path: "/api/queues", Tags: tags, Summary: "Create a queue space for a user", Description: createDoc, DefaultStatus: http.StatusCreated,
		Errors:    []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable},
		Responses: brokerFailed},
		func(ctx context.Context, in *queuesAdminCreateInput) (*httpx.Response[View], error) {
			return h.created(ctx, in.Body.UserID, in.Body.Name)
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "retryQueueSpace", Method: http.MethodPost,
		Path: "/api/queues/{id}/retry", Tags: tags, Summary: "Retry a failed or stuck queue space",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable}, Responses: brokerFailed},
		func(ctx context.Context, in *httpx.IDInput) (*httpx.Response[View], error) {
			sp, o, err := h.svc.Retry(ctx, in.ID)
			return h.answer(sp, o, err, false, "Queue space "+provision.StatusOf(sp))
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "deleteQueueSpace", Method: http.MethodDelete,
		Path: "/api/queues/{id}", Tags: tags, Summary: "Delete a queue space",
		Errors: []int{http.StatusNotFound, http.StatusBadGateway, http.StatusServiceUnavailable}, Responses: brokerFailed},
		func(ctx context.Context, in *httpx.IDInput) (*httpx.Response[View], error) {
			return h.deleted(ctx, in.ID, 0)
		})
}

func (h *Handler) created(ctx context.Context, userID int64, name string) (*httpx.Response[View], error) {
	sp, o, err := h.svc.Create(ctx, userID, name)
	return h.answer(sp, o, err, true, "Queue space created")
}

func (h *Handler) deleted(ctx context.Context, id, userID int64) (*httpx.Response[View], error) {
	sp, o, err := h.svc.Delete(ctx, id, userID)
	return h.answer(sp, o, err, false, "Queue space deleted")
}

// answer is the answer of a route that drove sp (httpx.Driven).
func (h *Handler) answer(sp *Space, o provision.Outcome, err error, created bool, done string) (*httpx.Response[View], error) {
	return httpx.Driven(sp, o, err, func(sp *Space) View { return view(h.svc.cfg, sp) },
		httpx.Answers{Created: created, Done: done, Failed: "The broker failed; the queue space is " + provision.StatusOf(sp)})
}
