package aikeys

import (
	"cmp"
	"time"

	"github.com/uptrace/bun"
)

// Statuses of an AI key.
const (
	StatusActive  = "Active"
	StatusRevoked = "Revoked"
	// StatusExpired is never stored: an Active key past its expiresAt is shown as Expired.
	StatusExpired = "Expired"
)

// KeyPrefix starts every key, so keys are recognisable (and secret scanners can find them).
const KeyPrefix = "sk-prov-"

// Key is an AI key as stored: only the SHA-256 of the key text, and its first characters for display.
// PreviousHash and PreviousValidUntil are no longer used (always NULL): rotated-out texts in their
// grace period are in ai_key_retired_hashes.
type Key struct {
	bun.BaseModel `bun:"table:ai_keys,alias:k"`

	ID                 int64      `bun:"id,pk,autoincrement"`
	UserID             int64      `bun:"user_id,notnull"`
	Name               string     `bun:"name,notnull"`
	Prefix             string     `bun:"prefix,notnull"`
	KeyHash            []byte     `bun:"key_hash,notnull"`
	PreviousHash       []byte     `bun:"previous_hash"`
	PreviousValidUntil *time.Time `bun:"previous_valid_until"`
	Status             string     `bun:"status,notnull"`
	ExpiresAt          *time.Time `bun:"expires_at"`
	LastUsedAt         *time.Time `bun:"last_used_at"`
	Requests           int64      `bun:"requests,notnull"`
	PromptTokens       int64      `bun:"prompt_tokens,notnull"`
	CompletionTokens   int64      `bun:"completion_tokens,notnull"`
	CreatedAt          time.Time  `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt          time.Time  `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
	RevokedAt          *time.Time `bun:"revoked_at"`
	// The key's policy (KeyPolicy); NULL: the platform's, no budget.
	AllowedModels       []string `bun:"allowed_models,array"`
	MaxTokensPerRequest *int     `bun:"max_tokens_per_request"`
	TokenBudget         *int64   `bun:"token_budget"`
	RequestBudget       *int64   `bun:"request_budget"`
	BudgetPeriod        string   `bun:"budget_period,notnull,default:'none'"`
}

// Usage counts what a key consumed.
type Usage struct {
	Requests         int64 `json:"requests"`
	PromptTokens     int64 `json:"promptTokens"`
	CompletionTokens int64 `json:"completionTokens"`
}

// View is a key as the API shows it; Key (the plain text) only in the create and rotate answers.
type View struct {
	ID         int64      `json:"id" example:"5"`
	Name       string     `json:"name" example:"ci pipeline"`
	Prefix     string     `json:"prefix" example:"sk-prov-7Hq2"`
	Status     string     `json:"status" enum:"Active,Revoked,Expired"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	ExpiresAt  *time.Time `json:"expiresAt"`
	Usage      Usage      `json:"usage"`
	Key        string     `json:"key,omitempty" doc:"Shown once."`
	UserID     int64      `json:"userId"`
	Policy     PolicyBody `json:"policy"`
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func view(k *Key) View {
	status := k.Status
	if status == StatusActive && k.ExpiresAt != nil && !time.Now().Before(*k.ExpiresAt) {
		status = StatusExpired
	}
	return View{ID: k.ID, Name: k.Name, Prefix: k.Prefix, Status: status, CreatedAt: k.CreatedAt.UTC(),
		LastUsedAt: utc(k.LastUsedAt), ExpiresAt: utc(k.ExpiresAt), UserID: k.UserID,
		Usage: Usage{Requests: k.Requests, PromptTokens: k.PromptTokens, CompletionTokens: k.CompletionTokens},
		Policy: PolicyBody{AllowedModels: k.AllowedModels, MaxTokensPerRequest: k.MaxTokensPerRequest,
			TokenBudget: k.TokenBudget, RequestBudget: k.RequestBudget, BudgetPeriod: cmp.Or(k.BudgetPeriod, PeriodNone)}}
}
