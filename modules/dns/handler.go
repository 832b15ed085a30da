package dns

import (
	"context"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
)

// Handler serves /api/me/dns* and /api/dns/records*.
type Handler struct{ svc *Service }

// RecordBody is the body of a record's create. Exported because the administrators' body embeds
// it: huma documents and validates the members of an embedded struct only when it is exported.
type RecordBody struct {
	_         struct{} `additionalProperties:"true"`
	Label     string   `json:"label" minLength:"1" maxLength:"63" doc:"One DNS label: a-z, 0-9, '-', no hyphen at either end ('--' at 3–4 only in an IDN A-label); A–Z lower-cased." example:"myapp"`
	Content   *string  `json:"content,omitempty" doc:"IPv4 address (dotted decimal) the record points to, not in 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/4 or 240.0.0.0/4, nor private or shared (unless Dns:AllowPrivateContent). Default Dns:DefaultContent." example:"203.0.113.10"`
	RecordTTL *int     `json:"recordTtl,omitempty" doc:"1 (automatic) or 60–86400; default Dns:RecordTtl. A proxied record gets 1." example:"300"`
	Proxied   *bool    `json:"proxied,omitempty" doc:"Route through the provider's proxy; default Dns:Proxied."`
}

// Resolve checks what the schema cannot for the members given (the service checks defaults): a 400
// lists them with the schema's errors.
func (b *RecordBody) Resolve(huma.Context) []error {
	var label, content *string
	if b.Label != "" {
		label = &b.Label
	}
	if c := strings.TrimSpace(orDefault(b.Content, "")); c != "" {
		content = &c
	}
	var errs []error
	for _, f := range fieldProblems(label, content, b.RecordTTL, true, "") { // private addresses: the service's to say
		errs = append(errs, httpx.Invalid(f.Field, f.Message))
	}
	return errs
}

type dnsCreateInput struct{ Body RecordBody }

type dnsAdminCreateInput struct {
	Body struct {
		RecordBody
		UserID int64 `json:"userId" minimum:"1"`
	}
}

type dnsAdminListInput struct {
	provision.AdminFilter
	Status string `query:"status" enum:"Pending,Active,Failed,Revoking,Revoked"`
}

func (in dnsAdminListInput) Filter() (provision.AdminFilter, string) {
	return in.AdminFilter, in.Status
}

const createDoc = "201 with the Active record. 409 when the label is reserved (Dns:ReservedLabels), live or held at the provider, or at " +
	"`Dns:MaxRecordsPerUser`; 502 with the record as stored when the provider failed (retried in the background)."

// providerFailedResponse documents the 502 of the operations that call the provider.
var providerFailedResponse = httpx.ProviderFailed("The DNS provider failed; `data` is the record as stored.")

// Register implements httpx.Routes.
func (h *Handler) Register(api *httpx.API) {
	tags := []string{"DNS"}
	httpx.RegisterMine(api, huma.Operation{OperationID: "listMyDnsRecords", Method: http.MethodGet,
		Path: "/api/me/dns", Tags: tags, Summary: "List my DNS records",
		Description: "Every record but the Revoked ones, oldest first."}, h.svc.List)
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "createMyDnsRecord", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/me/dns", Tags: tags, Summary: "Create a DNS A record", Description: createDoc, DefaultStatus: http.StatusCreated,
		Errors: []int{http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable}, Responses: providerFailedResponse},
		func(ctx context.Context, in *dnsCreateInput) (*httpx.Response[View], error) {
			return h.created(ctx, CreateInput{RecordBody: in.Body, UserID: authn.FromContext(ctx).UserID})
		})
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "revokeMyDnsRecord", Metadata: httpx.PerUserLimit("Provision"), Method: http.MethodDelete,
		Path: "/api/me/dns/{id}", Tags: tags, Summary: "Revoke a DNS record",
		Description: "Deleted at the provider, then Revoked. 409 when already revoked; 502 when the provider failed (retried in " +
			"the background).",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: providerFailedResponse},
		func(ctx context.Context, in *httpx.IDInput) (*httpx.Response[View], error) {
			r, o, err := h.svc.Revoke(ctx, in.ID, authn.FromContext(ctx).UserID)
			return httpx.Driven(r, o, err, view, httpx.Answers{Done: "DNS record revoked",
				Failed: "The DNS provider failed; the record stays Revoking and is retried in the background"})
		})

	atags := []string{"Admin: DNS records"}
	httpx.RegisterAdminList[dnsAdminListInput](api, huma.Operation{OperationID: "listDnsRecords", Method: http.MethodGet,
		Path: "/api/dns/records", Tags: atags, Summary: "List DNS records"}, h.svc.db, view)
	httpx.RegisterAdminGet(api, huma.Operation{OperationID: "getDnsRecord", Method: http.MethodGet,
		Path: "/api/dns/records/{id}", Tags: atags, Summary: "One DNS record", Errors: []int{http.StatusNotFound}}, h.svc.db, msgNotFound, view)
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "createDnsRecord", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/dns/records", Tags: atags, Summary: "Create a DNS record for a user", Description: createDoc,
		DefaultStatus: http.StatusCreated, Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable},
		Responses: providerFailedResponse},
		func(ctx context.Context, in *dnsAdminCreateInput) (*httpx.Response[View], error) {
			return h.created(ctx, CreateInput{RecordBody: in.Body.RecordBody, UserID: in.Body.UserID})
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "retryDnsRecord", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/dns/records/{id}/retry", Tags: atags, Summary: "Retry a failed or stuck DNS record",
		Description: "Drives a Failed, Pending or Revoking record now. 409 in another state, at a full quota, or for a name " +
			"held by a record not made here.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: providerFailedResponse},
		func(ctx context.Context, in *httpx.IDInput) (*httpx.Response[View], error) {
			r, o, err := h.svc.Retry(ctx, in.ID)
			return httpx.Driven(r, o, err, view, answers(r, false, "Record "+provision.StatusOf(r)))
		})
}

// answers are the messages of a route that drove r: done, and the provider's failure.
func answers(r *Record, created bool, done string) httpx.Answers {
	return httpx.Answers{Created: created, Done: done, Failed: "The DNS provider failed; the record is " + provision.StatusOf(r)}
}

func (h *Handler) created(ctx context.Context, in CreateInput) (*httpx.Response[View], error) {
	r, o, err := h.svc.Create(ctx, in)
	return httpx.Driven(r, o, err, view, answers(r, true, "DNS record created"))
}
