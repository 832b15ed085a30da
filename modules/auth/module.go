// Package auth is the auth module: registration, password and provider sign-in and recovery,
// sessions with rotating refresh tokens, TOTP, the sign-in lockout, GET /api/me and the bootstrap
// admin. Tokens and the guard are the platform's (platform/authn); this module tells the guard
// which sessions live (authn.Guard.UseSessions).
package auth

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/uptrace/bun"
	"go.uber.org/fx"

	"provisioner/modules/auth/migrations"
	"provisioner/platform/audit"
	"provisioner/platform/authn"
	"provisioner/platform/config"
	"provisioner/platform/db"
	"provisioner/platform/httpx"
	"provisioner/platform/mail"
	"provisioner/platform/module"
	"provisioner/platform/provision"
	"provisioner/platform/secrets"
)

// Module is the auth module: its wiring, its configuration section (GitHub:*, Google:*), its
// audit namespace and its OpenAPI tags.
var Module = module.Module{Name: "auth", Options: wiring, Config: Settings, AuditNamespaces: []string{"user"},
	Tags: map[string]string{
		"Auth":     "Registration, password sign-in and recovery, GitHub and Google sign-in, the current user.",
		"Sessions": "Sign-in sessions: list and end one's own; an admin's view of a user's.",
		"MFA": "The second factor: TOTP enrolment and recovery codes, step-up. A TOTP code (RFC 6238: SHA-1, six digits, " +
			"30-second steps) is accepted for the step before, the current one or the next, once; after `Auth:LockoutThreshold` " +
			"wrong codes each attempt waits a doubling delay (429 with `Retry-After`).",
	}}

// wiring is everything the auth module contributes to the fx graph.
var wiring = fx.Module("auth",
	fx.Provide(
		NewService,
		NewSessions,
		NewLockout,
		newOAuth,
		httpx.AsRoutes(NewHandler),
		db.AsMigrations(func() db.Migrations {
			return db.Migrations{Module: "auth", FS: migrations.FS, Go: []db.GoMigration{emailForms}}
		}),
	),
	fx.Invoke(bootstrapAdmin),
	fx.Invoke(func(g *authn.Guard, s *Sessions, cfg Config) {
		g.UseSessions(s, time.Duration(cfg.Auth.StepUpMinutes)*time.Minute)
	}),
	fx.Invoke(func(lc fx.Lifecycle, s *Service) { lc.Append(fx.StopHook(s.WaitRecovery)) }),
)

// ServiceParams are the Service's dependencies; NewUser is optional.
type ServiceParams struct {
	fx.In
	DB       *bun.DB
	Cfg      *config.Config
	Own      Config
	Hasher   *secrets.Hasher
	Sealer   *secrets.Sealer
	Sessions *Sessions
	Lockout  *Lockout
	Audit    *audit.Recorder
	Mailer   mail.Sender
	NewUser  provision.NewUserHook `optional:"true"`
	// Revokers revoke what an account taken over by a password reset handed out (AI keys).
	Revokers []provision.TakeoverRevoker `group:"takeover_revokers"`
	Log      *slog.Logger
}

// NewService builds the Service.
func NewService(p ServiceParams) *Service {
	return &Service{db: p.DB, cfg: p.Cfg, own: p.Own.Auth, hasher: p.Hasher, sealer: p.Sealer, sessions: p.Sessions, lockout: p.Lockout, audit: p.Audit,
		mailer: p.Mailer, newUser: p.NewUser, revokers: p.Revokers, log: p.Log,
		recoverySlots: make(chan struct{}, MaxRecoveryInFlight)}
}

// OAuthClientParams lets tests route the identity providers' hosts to fakes.
type OAuthClientParams struct {
	fx.In
	Client *http.Client `name:"oauth" optional:"true"`
}

func newOAuth(s *Service, cfg *config.Config, providers Config, p OAuthClientParams) *OAuth {
	return NewOAuth(s, cfg, providers, p.Client)
}

// bootstrapAdmin makes sure of the bootstrap admin once the schema is migrated.
func bootstrapAdmin(lc fx.Lifecycle, s *Service, _ *db.Migrated) {
	lc.Append(fx.StartHook(func(ctx context.Context) error { return s.EnsureBootstrapAdmin(ctx) }))
}
