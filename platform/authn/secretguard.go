package authn

import (
	"context"
	"fmt"

	"provisioner/platform/ratelimit"
)

// GuardSecret is the gate of every route that shows or changes a secret: a recent second factor
// (RequireStepUp) and one hit of the caller's RateLimit:PasswordReveal limit.
func GuardSecret(ctx context.Context, l *ratelimit.Limiter) error {
	if err := RequireStepUp(ctx); err != nil {
		return err
	}
	return l.Check(ctx, "PasswordReveal", fmt.Sprint(FromContext(ctx).UserID))
}
