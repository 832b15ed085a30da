package db

import "time"

// Account is the columns of the platform's users table that the modules reading accounts share
// (migrations/); a module's Bun model of the table embeds it beside the columns it alone writes.
type Account struct {
	ID            int64   `bun:"id,pk,autoincrement"`
	Email         string  `bun:"email,notnull"`
	FullName      string  `bun:"full_name,notnull"`
	Organization  string  `bun:"organization,notnull"`
	Role          string  `bun:"role,notnull"`
	PasswordHash  *string `bun:"password_hash"`
	SecurityStamp int64   `bun:"security_stamp,notnull"`
	// EmailVerifiedAt is when Email was last proven to reach the account's owner (an account made
	// from a provider's verified email, a reset through the mailed link); nil while it is not. A
	// change of the email clears it (trigger users_email_changed).
	EmailVerifiedAt *time.Time `bun:"email_verified_at"`
	CreatedAt       time.Time  `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt       time.Time  `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
	DeletedAt       *time.Time `bun:"deleted_at"`
}
