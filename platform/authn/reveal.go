package authn

import (
	"context"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/httpx"
	"provisioner/platform/ratelimit"
)

// RegisterReveal registers op (Authenticated): the secret of the caller's row id, as reveal
// returns it, behind GuardSecret.
func RegisterReveal[R any](api *httpx.API, op huma.Operation, l *ratelimit.Limiter, reveal func(ctx context.Context, id, userID int64) (*R, error)) {
	httpx.Register(api, httpx.Authenticated, op, func(ctx context.Context, in *httpx.IDInput) (*httpx.Response[R], error) {
		if err := GuardSecret(ctx, l); err != nil {
			return nil, err
		}
		r, err := reveal(ctx, in.ID, FromContext(ctx).UserID)
		if err != nil {
			return nil, err
		}
		return httpx.OK("OK", *r), nil
	})
}
