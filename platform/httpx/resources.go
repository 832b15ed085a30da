package httpx

import (
	"context"

	"github.com/danielgtaylor/huma/v2"
	"github.com/uptrace/bun"

	"provisioner/platform/provision"
)

// AdminFiltered is the input of an administrators' resource list: provision.AdminFilter beside
// the module's own status enum (a query parameter).
type AdminFiltered interface {
	Filter() (provision.AdminFilter, string)
}

// IDInput is the input of a route on one row: its id in the path.
type IDInput struct {
	ID int64 `path:"id" minimum:"1"`
}

// RegisterAdminList registers op (AdminOnly): a page of T's rows, shown as V
// (provision.AdminList), filtered by I.
func RegisterAdminList[I AdminFiltered, T, V any](api *API, op huma.Operation, idb bun.IDB, view func(*T) V) {
	Register(api, AdminOnly, op, func(ctx context.Context, in *I) (*Response[Page[V]], error) {
		f, status := (*in).Filter()
		p, err := provision.AdminList(ctx, idb, f, status, view)
		if err != nil {
			return nil, err
		}
		return OK("OK", p), nil
	})
}

// RegisterAdminGet registers op (AdminOnly): one row of T by its id, shown as V
// (provision.Find: a 404 notFound when there is none).
func RegisterAdminGet[T, V any](api *API, op huma.Operation, idb bun.IDB, notFound string, view func(*T) V) {
	Register(api, AdminOnly, op, func(ctx context.Context, in *IDInput) (*Response[V], error) {
		row, err := provision.Find[T](ctx, idb, in.ID, notFound)
		if err != nil {
			return nil, err
		}
		return OK("OK", view(row)), nil
	})
}
