package httpx

import (
	"context"
	"io/fs"

	"github.com/danielgtaylor/huma/v2"
	"go.uber.org/fx"

	"provisioner/platform/config"
	"provisioner/platform/db"
	"provisioner/platform/module"
	"provisioner/platform/reqctx"
)

// ResourceModule is the descriptor of a resource module named name: its configuration section,
// its OpenAPI tags, its audit namespace (its name), and its fx wiring: opts, the routes built by
// handler (a constructor of Routes) and its SQL migrations.
func ResourceModule(name string, settings config.AnySection, tags map[string]string, migrations fs.FS, handler any, opts ...fx.Option) module.Module {
	opts = append(opts, fx.Provide(AsRoutes(handler),
		db.AsMigrations(func() db.Migrations { return db.Migrations{Module: name, FS: migrations} })))
	return module.Module{Name: name, Options: fx.Module(name, opts...), Config: settings, AuditNamespaces: []string{name}, Tags: tags}
}

// RegisterMine registers op (Authenticated): the caller's own rows, as list returns them.
func RegisterMine[V any](api *API, op huma.Operation, list func(ctx context.Context, userID int64) ([]V, error)) {
	Register(api, Authenticated, op, func(ctx context.Context, _ *struct{}) (*Response[[]V], error) {
		rows, err := list(ctx, reqctx.CallerOf(ctx).CallerID())
		if err != nil {
			return nil, err
		}
		return OK("OK", rows), nil
	})
}

// ProviderFailed documents the 502 of the operations that call a provider: what is the answer's
// description; its Retry-After header is documented alike for every module.
func ProviderFailed(what string) map[string]*huma.Response {
	return map[string]*huma.Response{"502": {Description: what,
		Headers: map[string]*huma.Param{"Retry-After": {Description: retryAfterDoc, Schema: &huma.Schema{Type: "integer"}}}}}
}

// retryAfterDoc documents the Retry-After of every provider's 502 (Driven sets it).
const retryAfterDoc = "Only while the change is still pending (retried in the background): seconds until the next try, " +
	"at least the provider's own `Retry-After` up to a day."
