package admin

import (
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/db"
)

// userRow is a row of the platform's users table as administration sees it.
type userRow struct {
	bun.BaseModel `bun:"table:users,alias:u"`
	db.Account
	// AiMonthlyTokenBudget is the user's AI token ceiling per calendar month (UTC) across all
	// their AI keys (nil: none); the aikeys module enforces it.
	AiMonthlyTokenBudget *int64 `bun:"ai_monthly_token_budget"`
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
