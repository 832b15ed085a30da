package auth

import (
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/uptrace/bun"

	"provisioner/platform/db"
)

// User is a row of the platform's users table, as far as accounts go: an insert returns only these
// columns (?Columns), so another module's column of the table is never read here.
type User struct {
	bun.BaseModel `bun:"table:users,alias:u"`
	db.Account
}

// resetToken is a single-use password reset token; only its SHA-256 is stored.
type resetToken struct {
	bun.BaseModel `bun:"table:password_reset_tokens"`

	ID        int64      `bun:"id,pk,autoincrement"`
	UserID    int64      `bun:"user_id,notnull"`
	TokenHash []byte     `bun:"token_hash,notnull"`
	Email     string     `bun:"email,notnull"` // the address the link was mailed to
	ExpiresAt time.Time  `bun:"expires_at,notnull"`
	UsedAt    *time.Time `bun:"used_at"`
	CreatedAt time.Time  `bun:"created_at,nullzero,notnull,default:current_timestamp"`
}

// UserView is the authenticated user as the API shows it.
type UserView struct {
	ID             int64     `json:"id" example:"1"`
	Name           string    `json:"name" example:"Ada Lovelace"`
	Email          string    `json:"email" format:"idn-email" example:"ada@example.com"`
	Role           string    `json:"role" enum:"User,Admin" example:"User"`
	Provider       string    `json:"provider" doc:"Empty for local accounts." example:""`
	ProviderUserID string    `json:"providerUserId" doc:"Empty for local accounts." example:""`
	Organization   string    `json:"organization" example:"Analytical Engines Ltd"`
	EmailVerified  bool      `json:"emailVerified" readOnly:"true" doc:"Whether the email is proven to reach the owner (a provider's verified email, or a completed password reset)." example:"false"`
	CreatedAt      time.Time `json:"createdAt"`
}

func viewOf(u *User, provider, providerUserID string) UserView {
	return UserView{
		ID: u.ID, Name: u.FullName, Email: u.Email, Role: u.Role,
		Provider: provider, ProviderUserID: providerUserID,
		Organization: u.Organization, EmailVerified: u.EmailVerifiedAt != nil, CreatedAt: u.CreatedAt.UTC(),
	}
}

// AuthResult is the data of register and login: the spec's auth result plus the second
// description's token and userId (and tenantDatabase on registration).
type AuthResult struct {
	AccessToken string    `json:"accessToken" doc:"JWT (HS256)."`
	TokenType   string    `json:"tokenType" example:"Bearer"`
	ExpiresAt   time.Time `json:"expiresAt" doc:"ISO 8601 UTC."`
	Provider    string    `json:"provider" example:"Password"`
	User        UserView  `json:"user"`
	Token       string    `json:"token" doc:"Same as accessToken."`
	UserID      int64     `json:"userId" example:"1"`
	// RefreshToken is the session's single-use refresh token (only its hash is stored).
	RefreshToken     string    `json:"refreshToken" doc:"Single use, for POST /api/auth/refresh; valid until refreshExpiresAt while the session lasts."`
	RefreshExpiresAt time.Time `json:"refreshExpiresAt" doc:"Auth:RefreshDays after the sign-in or the last refresh."`
	SessionID        int64     `json:"sessionId" example:"7" doc:"The sign-in session the tokens belong to (GET /api/me/sessions)."`
}

// LoginResult is the answer of a sign-in whose first factor passed: the auth result, or, for a
// user with TOTP on, only mfaRequired and the mfaToken that POST /api/auth/mfa completes.
type LoginResult struct {
	*AuthResult
	MFARequired  bool       `json:"mfaRequired" doc:"True when the account has TOTP on: no tokens, only mfaToken for POST /api/auth/mfa."`
	MFAToken     string     `json:"mfaToken,omitempty" doc:"Only with mfaRequired: completes the sign-in at POST /api/auth/mfa, once, within 5 minutes."`
	MFAExpiresAt *time.Time `json:"mfaExpiresAt,omitempty" doc:"Only with mfaRequired: when mfaToken stops working."`
}

// TransformSchema documents that only mfaRequired is always present: the auth result's fields are
// absent while a second factor is required.
func (LoginResult) TransformSchema(_ huma.Registry, s *huma.Schema) *huma.Schema {
	s.Required = []string{"mfaRequired"}
	return s
}

// RegisterResult is the auth result plus the database provisioned for the new user.
type RegisterResult struct {
	AuthResult
	TenantDatabase any `json:"tenantDatabase" doc:"The database provisioned for the new user (possibly Provisioning or Failed), or null when no engine is configured."`
}
