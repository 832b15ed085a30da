package admin

import (
	"time"

	"github.com/uptrace/bun"
)

// userRow is a row of the platform's users table as administration sees it.
type userRow struct {
	bun.BaseModel `bun:"table:users,alias:u"`

	ID            int64   `bun:"id,pk,autoincrement"`
	Email         string  `bun:"email,notnull"`
	FullName      string  `bun:"full_name,notnull"`
	Organization  string  `bun:"organization,notnull"`
	Role          string  `bun:"role,notnull"`
	PasswordHash  *string `bun:"password_hash"`
	SecurityStamp int64   `bun:"security_stamp,notnull"`
	// EmailVerifiedAt is the auth module's proof of the email; a change of the email clears it.
	EmailVerifiedAt *time.Time `bun:"email_verified_at"`
	// AiMonthlyTokenBudget is the user's AI token ceiling per calendar month (UTC) across all
	// their AI keys (nil: none); the aikeys module enforces it.
	AiMonthlyTokenBudget *int64     `bun:"ai_monthly_token_budget"`
	CreatedAt            time.Time  `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt            time.Time  `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
	DeletedAt            *time.Time `bun:"deleted_at"`
}

// User is an account as the admin API shows it (never the password hash).
type User struct {
	ID                   int64     `json:"id" example:"7"`
	Name                 string    `json:"name" example:"Ada Lovelace"`
	FullName             string    `json:"fullName" example:"Ada Lovelace"`
	Email                string    `json:"email" format:"idn-email" example:"ada@example.com"`
	Organization         string    `json:"organization" example:"Analytical Engines Ltd"`
	Role                 string    `json:"role" enum:"User,Admin" example:"User"`
	HasPassword          bool      `json:"hasPassword" doc:"False for accounts that only sign in through GitHub or Google."`
	EmailVerified        bool      `json:"emailVerified" readOnly:"true" doc:"Whether the email is proven to reach the owner (a provider's verified email, or a completed password reset)." example:"false"`
	AiMonthlyTokenBudget *int64    `json:"aiMonthlyTokenBudget" nullable:"true" doc:"Tokens per calendar month (UTC) all the user's AI keys may spend together; null: no ceiling." example:"1000000"`
	CreatedAt            time.Time `json:"createdAt"`
	UpdatedAt            time.Time `json:"updatedAt"`
}

func viewUser(u *userRow) User {
	return User{ID: u.ID, Name: u.FullName, FullName: u.FullName, Email: u.Email, Organization: u.Organization,
		Role: u.Role, HasPassword: u.PasswordHash != nil, EmailVerified: u.EmailVerifiedAt != nil, AiMonthlyTokenBudget: u.AiMonthlyTokenBudget, CreatedAt: u.CreatedAt.UTC(), UpdatedAt: u.UpdatedAt.UTC()}
}
