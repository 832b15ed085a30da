package dns

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
)

// Handler serves /api/me/dns* and /api/dns/records*.
type Handler struct{ svc *Service }

// RecordBody is the body of a record's create. Exported because the administrators' body embeds
// it: huma documents and validates the members of an embedded struct only when it is exported.
type RecordBody struct {
	_         struct{} `additionalProperties:"true"`
	Label     string   `json:"label" minLength:"1" maxLength:"63" doc:"One DNS label: a-z, 0-9, '-', no hyphen at either end, '--' in the 3rd and 4th characters only in a valid IDN A-label (xn--…); A–Z lower-cased, any other character (a non-ASCII letter included) a 400." example:"myapp"`
	Content   *string  `json:"content,omitempty" doc:"IPv4 address (dotted decimal) the record points to, other than 0.0.0.0/8 (this network), loopback (127.0.0.0/8), link-local (169.254.0.0/16), multicast (224.0.0.0/4) and 240.0.0.0/4 (reserved, 255.255.255.255 included); private ranges (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10) are accepted. Default (when omitted) Dns:DefaultContent; an empty one is a 400." example:"203.0.113.10"`
	RecordTTL *int     `json:"recordTtl,omitempty" doc:"1 (automatic) or 60–86400; default Dns:RecordTtl. A proxied record is sent and stored with 1: the provider manages its TTL." example:"300"`
	Proxied   *bool    `json:"proxied,omitempty" doc:"Route through the provider's proxy; default Dns:Proxied."`
}

// Resolve checks what the schema cannot, alongside it, for the members given (defaults are checked
// by the service): a 400 lists them with the schema's errors.
func (b *RecordBody) Resolve(huma.Context) []error {
	var errs []error
	if _, ok := NormalizeLabel(b.Label); b.Label != "" && !ok {
		errs = append(errs, httpx.Invalid("label", msgLabel))
	}
	if b.Content != nil && strings.TrimSpace(*b.Content) != "" && !ValidContent(strings.TrimSpace(*b.Content)) {
		errs = append(errs, httpx.Invalid("content", msgContent))
	}
	if b.RecordTTL != nil && !ValidTTL(*b.RecordTTL) {
		errs = append(errs, httpx.Invalid("recordTtl", msgTTL))
	}
	return errs
}

type dnsCreateInput struct{ Body RecordBody }

type idInput struct {
	ID int64 `path:"id" minimum:"1"`
}

type dnsAdminCreateInput struct {
	Body struct {
		RecordBody
		UserID int64 `json:"userId" minimum:"1"`
	}
}

type dnsAdminListInput struct {
	httpx.PageQuery
	UserID int64  `query:"userId" minimum:"0"`
	Status string `query:"status" enum:"Pending,Active,Failed,Revoking,Revoked"`
}

const createDoc = "The intent is stored as Pending, then the provider is called. 201 with the Active record; " +
	"409 when the label is live in the cell, when the provider already holds the name for a record not made by this " +
	"service (81053/81057/81058, or found by the lookup before creating, a record of any type: A, AAAA, CNAME, TXT, MX…; nothing is stored), or when the quota " +
	"`Dns:MaxRecordsPerUser` is reached; 502 when the provider failed — `data` is the record as stored: Failed with " +
	"the provider's error in `errorMessage`, or still Pending (a transient failure, retried in the background; then " +
	"`Retry-After` says when, never sooner than the provider's own `Retry-After`, honoured up to a day). " +
	"Each provider call (the lookup, the create) takes at most `Dns:TimeoutSeconds`, its retries included; one that times " +
	"out is not tried again within the request (502, Pending, `DNS provider timed out`): the background finisher does. " +
	"A Failed record does not stay in the zone: a record its unanswered attempts may have made at the provider " +
	"(carrying its marker comment and its content) is deleted in the background; that cleanup is retried for 7 days " +
	"while the provider fails, then given up (logged for an operator). A record at the name carrying the marker and " +
	"content of another of our records that is no longer live is deleted by this create, which then proceeds."

// providerFailedResponse documents the 502 of the operations that call the provider.
var providerFailedResponse = map[string]*huma.Response{
	"502": {Description: "The DNS provider failed; `data` is the record as stored.",
		Headers: map[string]*huma.Param{"Retry-After": {Description: "Only while the record is Pending or Revoking: seconds " +
			"until the background finisher tries the provider again (at least the provider's own `Retry-After`, honoured up to a day). Nothing " +
			"needs to be sent again: read the record after it.", Schema: &huma.Schema{Type: "integer"}}}},
}

// Register implements httpx.Routes.
func (h *Handler) Register(api *httpx.API) {
	tags := []string{"DNS"}
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "listMyDnsRecords", Method: http.MethodGet,
		Path: "/api/me/dns", Tags: tags, Summary: "List my DNS records",
		Description: "Pending, Active, Revoking and Failed records (a Failed one with its error, until it is revoked), oldest first. " +
			"Revoked records are not listed (administrators still see them, `GET /api/dns/records?status=Revoked`)."},
		func(ctx context.Context, _ *struct{}) (*httpx.Response[[]View], error) {
			list, err := h.svc.List(ctx, authn.FromContext(ctx).UserID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", list), nil
		})
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "createMyDnsRecord", Method: http.MethodPost, Metadata: httpx.Idempotent(),
		Path: "/api/me/dns", Tags: tags, Summary: "Create a DNS A record", Description: createDoc, DefaultStatus: http.StatusCreated,
		Errors: []int{http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable}, Responses: providerFailedResponse},
		func(ctx context.Context, in *dnsCreateInput) (*httpx.Response[View], error) {
			b := in.Body
			return h.created(ctx, CreateInput{UserID: authn.FromContext(ctx).UserID, Label: b.Label, Content: b.Content, RecordTTL: b.RecordTTL, Proxied: b.Proxied})
		})
	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "revokeMyDnsRecord", Method: http.MethodDelete,
		Path: "/api/me/dns/{id}", Tags: tags, Summary: "Revoke a DNS record",
		Description: "Active, Pending or Failed → Revoking → deleted at the provider → Revoked (200). A Failed record is checked at the provider " +
			"too (its create may have reached it): the name is looked up and only a record carrying this record's marker comment is deleted. " +
			"A Failed record whose label another live record now uses is Revoked at once (200): the finisher then deletes in the " +
			"background only a record carrying this one's marker and content, never the other one's (retried for 7 days while " +
			"the provider fails, then given up and logged for an operator). A record revoked while Pending (its create's outcome " +
			"unknown, e.g. timed out on our side) is looked up too, and checked again 5 minutes later in the background (a slow " +
			"provider may carry the create out late): a record carrying its marker is deleted. 409 when already revoked. " +
			"502 when the provider failed: the record stays Revoking with the error and is retried in the background " +
			"(`Retry-After` says when). Only the provider's own \"record does not exist\" (81044, 1032) counts as already " +
			"deleted; any other 404 is a failure. A record already Revoking whose next attempt is not due yet (backoff, the " +
			"provider's Retry-After) is not sent to the provider again: 502 with `Retry-After` of the remaining wait.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: providerFailedResponse},
		func(ctx context.Context, in *idInput) (*httpx.Response[View], error) {
			return h.revoked(ctx, in.ID, authn.FromContext(ctx).UserID)
		})

	atags := []string{"Admin: DNS records"}
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "listDnsRecords", Method: http.MethodGet,
		Path: "/api/dns/records", Tags: atags, Summary: "List DNS records"},
		func(ctx context.Context, in *dnsAdminListInput) (*httpx.Response[httpx.Page[View]], error) {
			p, err := h.svc.AdminList(ctx, AdminFilter{UserID: in.UserID, Status: in.Status, PageQuery: in.PageQuery})
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", p), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "getDnsRecord", Method: http.MethodGet,
		Path: "/api/dns/records/{id}", Tags: atags, Summary: "One DNS record", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idInput) (*httpx.Response[View], error) {
			r, err := h.svc.get(ctx, in.ID, 0)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", view(r)), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "createDnsRecord", Method: http.MethodPost, Metadata: httpx.Idempotent(),
		Path: "/api/dns/records", Tags: atags, Summary: "Create a DNS record for a user", Description: createDoc,
		DefaultStatus: http.StatusCreated, Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway, http.StatusServiceUnavailable},
		Responses: providerFailedResponse},
		func(ctx context.Context, in *dnsAdminCreateInput) (*httpx.Response[View], error) {
			b := in.Body
			return h.created(ctx, CreateInput{UserID: b.UserID, Label: b.Label, Content: b.Content, RecordTTL: b.RecordTTL, Proxied: b.Proxied})
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "retryDnsRecord", Method: http.MethodPost, Metadata: httpx.Idempotent(),
		Path: "/api/dns/records/{id}/retry", Tags: atags, Summary: "Retry a failed or stuck DNS record",
		Description: "Failed → Pending, driven now (409 when its user's quota `Dns:MaxRecordsPerUser` is full meanwhile: it stays Failed); " +
			"Pending or Revoking → driven now. Other states: 409. 409 also when the " +
			"provider holds the name for a record not made by this service: the record is Failed again (in `data`).",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: providerFailedResponse},
		func(ctx context.Context, in *idInput) (*httpx.Response[View], error) {
			r, err := h.svc.Retry(ctx, in.ID)
			if r == nil {
				return nil, err
			}
			switch r.Status {
			case StatusActive, StatusRevoked:
				return httpx.OK("Record "+r.Status, view(r)), nil
			}
			return nil, providerFailed("The DNS provider failed; the record is "+r.Status, r)
		})
}

func (h *Handler) created(ctx context.Context, in CreateInput) (*httpx.Response[View], error) {
	r, err := h.svc.Create(ctx, in)
	if r == nil {
		return nil, err
	}
	if r.Status == StatusActive {
		return httpx.Created("DNS record created", view(r)), nil
	}
	return nil, providerFailed("The DNS provider failed; the record is "+r.Status, r)
}

func (h *Handler) revoked(ctx context.Context, id, userID int64) (*httpx.Response[View], error) {
	r, err := h.svc.Revoke(ctx, id, userID)
	if r == nil {
		return nil, err
	}
	if r.Status == StatusRevoked {
		return httpx.OK("DNS record revoked", view(r)), nil
	}
	return nil, providerFailed("The DNS provider failed; the record stays Revoking and is retried in the background", r)
}

// providerFailed is the 502 of a call to the provider that did not succeed, with the record as
// stored. A record the finisher will try again (Pending, Revoking) carries Retry-After: the
// seconds until that attempt, which honours the provider's own Retry-After.
func providerFailed(msg string, r *Record) error {
	e := httpx.BadGateway(msg, view(r))
	if r.Status == StatusPending || r.Status == StatusRevoking {
		wait := time.Until(r.NextAttemptAt)
		e = e.WithHeader("Retry-After", fmt.Sprint(max(1, int64(math.Ceil(wait.Seconds())))))
	}
	return e
}
