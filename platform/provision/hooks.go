package provision

import (
	"context"

	"github.com/uptrace/bun"
	"go.uber.org/fx"
)

// NewUser describes an account that was just created (registration, OAuth sign-up, admin).
type NewUser struct {
	UserID       int64
	Email        string
	FullName     string
	Organization string
}

// NewUserHook gives a new account its first resource (the databases module provisions the tenant
// database). The result is returned to the client as is (tenantDatabase); an error must not undo
// the registration: the hook leaves its row in an in-between state for the Finisher instead.
type NewUserHook interface {
	OnUserCreated(ctx context.Context, u NewUser) (any, error)
}

// UserReleaser is implemented by every module that owns per-user resources. When an account is
// deleted, ReleaseUser marks the user's rows for deprovisioning within tx (the same transaction
// that deletes the account); the Finisher then deletes them at the providers.
type UserReleaser interface {
	ReleaseUser(ctx context.Context, tx bun.IDB, userID int64) error
}

// AsUserReleaser provides a module's UserReleaser to the platform.
func AsUserReleaser(f any) any {
	return fx.Annotate(f, fx.As(new(UserReleaser)), fx.ResultTags(`group:"user_releasers"`))
}

// AsNewUserHook provides the (single) NewUserHook.
func AsNewUserHook(f any) any {
	return fx.Annotate(f, fx.As(new(NewUserHook)))
}

// TakeoverRevoker is implemented by every module that hands an account credentials which work
// without the account's session tokens (AI keys, database owner passwords). When a password reset takes an account over from
// whoever made it (the reset proves an email the account had not proven, or unlinks identities),
// RevokeOnTakeover revokes them within tx (the reset's transaction), so the one who made the
// account keeps nothing that still works once the reset is answered. It returns what it revoked,
// for the reset's audit event (ids only, never secrets); an empty map when there was nothing.
type TakeoverRevoker interface {
	RevokeOnTakeover(ctx context.Context, tx bun.IDB, userID int64) (map[string]any, error)
}

// TakeoverFollower is implemented by a TakeoverRevoker whose revocation is only stored as intent
// in the reset's transaction and made outside it (the databases module sets the new owner
// passwords on the engines). Once the reset has committed, FollowTakeover drives that work now,
// within a bound of its own, so the reset's answer comes after it; what it does not finish (a
// provider that does not answer) the Finisher finishes later. It never fails the reset.
type TakeoverFollower interface {
	FollowTakeover(ctx context.Context, userID int64)
}

// AsTakeoverRevoker provides a module's TakeoverRevoker to the platform.
func AsTakeoverRevoker(f any) any {
	return fx.Annotate(f, fx.As(new(TakeoverRevoker)), fx.ResultTags(`group:"takeover_revokers"`))
}
