package wfauto

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
)

// Handler serves /api/me/wfauto* and /api/wfauto/accounts*.
type Handler struct{ svc *Service }

type wfProvisionInput struct {
	Body *struct {
		_ struct{} `additionalProperties:"true"`
	} `required:"false"`
}

type wfAdminProvisionInput struct {
	Body struct {
		_      struct{} `additionalProperties:"true"`
		UserID int64    `json:"userId" minimum:"1"`
	}
}

type wfAdminListInput struct {
	provision.AdminFilter
	Status string `query:"status" enum:"Pending,Active,Failed,Deprovisioning,Deprovisioned"`
}

func (in wfAdminListInput) Filter() (provision.AdminFilter, string) { return in.AdminFilter, in.Status }

const provisionDoc = "201 with the Active account. 409 while one is Pending or Active (after Failed it tries again); " +
	"502 with the account as stored when the cell failed; 503 when no cell is configured."

// cellFailedResponse documents the 502 of the operations that call the cell.
var cellFailedResponse = httpx.ProviderFailed("The cell failed, timed out, was rate limiting or answered garbage; `data` is the account as stored.")

// Register implements httpx.Routes.
func (h *Handler) Register(api *httpx.API) {
	tags := []string{"Workflow automation"}
	httpx.RegisterMine(api, huma.Operation{OperationID: "listMyWfautoAccounts", Method: http.MethodGet,
		Path: "/api/me/wfauto", Tags: tags, Summary: "List my workflow-automation accounts"}, h.svc.List)
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "provisionMyWfautoAccount", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/me/wfauto/provision", Tags: tags, Summary: "Provision my workflow-automation account", Description: provisionDoc,
		DefaultStatus: http.StatusCreated, Errors: []int{http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable},
		Responses: cellFailedResponse},
		func(ctx context.Context, _ *wfProvisionInput) (*httpx.Response[View], error) {
			return h.provisioned(ctx, authn.FromContext(ctx).UserID)
		})

	atags := []string{"Admin: workflow automation"}
	httpx.RegisterAdminList[wfAdminListInput](api, huma.Operation{OperationID: "listWfautoAccounts", Method: http.MethodGet,
		Path: "/api/wfauto/accounts", Tags: atags, Summary: "List workflow-automation accounts"}, h.svc.db, view)
	httpx.RegisterAdminGet(api, huma.Operation{OperationID: "getWfautoAccount", Method: http.MethodGet,
		Path: "/api/wfauto/accounts/{id}", Tags: atags, Summary: "One workflow-automation account", Errors: []int{http.StatusNotFound}},
		h.svc.db, msgNotFound, view)
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "provisionWfautoAccount", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/wfauto/accounts", Tags: atags, Summary: "Provision an account for a user", Description: provisionDoc,
		DefaultStatus: http.StatusCreated, Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable},
		Responses: cellFailedResponse},
		func(ctx context.Context, in *wfAdminProvisionInput) (*httpx.Response[View], error) {
			return h.provisioned(ctx, in.Body.UserID)
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "retryWfautoAccount", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/wfauto/accounts/{id}/retry", Tags: atags, Summary: "Retry a failed or stuck account",
		Description: "Failed → provisioned again (same Idempotency-Key); Pending or Deprovisioning → driven now. Other states: 409.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: cellFailedResponse},
		func(ctx context.Context, in *httpx.IDInput) (*httpx.Response[View], error) {
			a, o, err := h.svc.Retry(ctx, in.ID)
			return httpx.Driven(a, o, err, view, answers(a, false, "Account "+provision.StatusOf(a)))
		})
}

func (h *Handler) provisioned(ctx context.Context, userID int64) (*httpx.Response[View], error) {
	a, o, err := h.svc.Provision(ctx, userID)
	return httpx.Driven(a, o, err, view, answers(a, true, "Workflow-automation account provisioned"))
}

// answers are the messages of a route that drove a: done, and the cell's failure.
func answers(a *Account, created bool, done string) httpx.Answers {
	return httpx.Answers{Created: created, Done: done, Failed: "The workflow-automation cell failed; the account is " + provision.StatusOf(a)}
}
