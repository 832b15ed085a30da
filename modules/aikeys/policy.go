package aikeys

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/uptrace/bun"

	"provisioner/platform/audit"
	"provisioner/platform/db"
	"provisioner/platform/fault"
)

// PolicyBody is a key's policy as create and PATCH take it; on PATCH a member left out is kept.
type PolicyBody struct {
	AllowedModels       []string `json:"allowedModels,omitempty" maxItems:"100"`
	MaxTokensPerRequest *int     `json:"maxTokensPerRequest,omitempty" minimum:"0" maximum:"100000000"`
	TokenBudget         *int64   `json:"tokenBudget,omitempty" minimum:"0"`
	RequestBudget       *int64   `json:"requestBudget,omitempty" minimum:"0"`
	BudgetPeriod        string   `json:"budgetPeriod,omitempty" enum:"day,month,none"`
}

// check refuses what the platform does not allow: a model outside Ai:AllowedModels, a
// maxTokensPerRequest above Ai:MaxTokensPerRequest (400 naming the member).
func (b PolicyBody) check(c *Caps) error {
	var invalid []fault.FieldError
	for _, m := range b.AllowedModels {
		if !c.platformAllows(m) {
			invalid = append(invalid, fault.FieldError{Field: "allowedModels", Message: fmt.Sprintf("%q is not in Ai:AllowedModels", m)})
			break
		}
	}
	if b.MaxTokensPerRequest != nil && int64(*b.MaxTokensPerRequest) > c.maxTokens {
		invalid = append(invalid, fault.FieldError{Field: "maxTokensPerRequest", Message: fmt.Sprintf("must be at most %d (Ai:MaxTokensPerRequest)", c.maxTokens)})
	}
	if len(invalid) > 0 {
		return fault.Invalid("Validation failed", invalid...)
	}
	return nil
}

// apply sets on k what b names (0 and [] clear) and answers the columns it set.
func (b PolicyBody) apply(k *Key) []string {
	var cols []string
	if b.AllowedModels != nil {
		k.AllowedModels = slices.Compact(slices.Sorted(slices.Values(b.AllowedModels)))
		if len(k.AllowedModels) == 0 {
			k.AllowedModels = nil
		}
		cols = append(cols, "allowed_models")
	}
	if b.MaxTokensPerRequest != nil {
		k.MaxTokensPerRequest = nil
		if *b.MaxTokensPerRequest > 0 {
			k.MaxTokensPerRequest = b.MaxTokensPerRequest
		}
		cols = append(cols, "max_tokens_per_request")
	}
	nonZero := func(v *int64) *int64 {
		if *v > 0 {
			return v
		}
		return nil
	}
	if b.TokenBudget != nil {
		k.TokenBudget = nonZero(b.TokenBudget)
		cols = append(cols, "token_budget")
	}
	if b.RequestBudget != nil {
		k.RequestBudget = nonZero(b.RequestBudget)
		cols = append(cols, "request_budget")
	}
	if b.BudgetPeriod != "" {
		k.BudgetPeriod = b.BudgetPeriod
		cols = append(cols, "budget_period")
	}
	return cols
}

// SetPolicy changes a key's policy (what body names); in force on every replica once answered,
// spending so far in the period kept: the key id of ownerID's (another's is not found). Audited as
// about the owner, by whoever asked (the owner, or an admin).
func (s *Keys) SetPolicy(ctx context.Context, id, ownerID int64, body PolicyBody) (*View, error) {
	var out *Key
	err := db.RunInTx(ctx, s.db, func(ctx context.Context, tx bun.Tx) error {
		k := new(Key)
		q := tx.NewSelect().Model(k).Where("id = ?", id).Where("user_id = ?", ownerID)
		if err := q.For("UPDATE").Scan(ctx); errors.Is(err, sql.ErrNoRows) {
			return fault.NotFound("AI key not found")
		} else if err != nil {
			return fmt.Errorf("lock ai key %d: %w", id, err)
		}
		if k.Status != StatusActive {
			return fault.Conflict("A revoked key cannot be changed")
		}
		cols := body.apply(k)
		if len(cols) > 0 {
			if _, err := tx.NewUpdate().Model(k).Column(cols...).Set("updated_at = now()").WherePK().Returning("*").Exec(ctx); err != nil {
				return fmt.Errorf("set policy of ai key %d: %w", id, err)
			}
		}
		out = k
		return s.audit.RecordTx(ctx, tx, audit.Event{Action: "aikey.policy_changed", UserID: audit.Int64(ownerID), TargetType: "aiKey",
			TargetID: fmt.Sprint(id), Details: map[string]any{"allowedModels": k.AllowedModels, "maxTokensPerRequest": k.MaxTokensPerRequest,
				"tokenBudget": k.TokenBudget, "requestBudget": k.RequestBudget, "budgetPeriod": k.BudgetPeriod}})
	})
	if err != nil {
		return nil, err
	}
	v := view(out)
	return &v, nil
}
