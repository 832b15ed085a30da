package wfauto

import (
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/provision"
)

// Account is an account as stored.
type Account struct {
	bun.BaseModel `bun:"table:wfauto_accounts,alias:w"`

	ExternalAccountID string `bun:"external_account_id,notnull"`
	URL               string `bun:"url,notnull"`
	provision.State
	// ReleasedBy is who deleted the owner (Deprovisioning): the actor of wfauto.deprovisioned.
	ReleasedBy *int64 `bun:"released_by"`
	// IdempotencyKey is sent with every create of this account: a random UUID made by the database
	// with the row, or the row's id for a row whose create may have reached the cell keyed by it.
	IdempotencyKey string `bun:"idempotency_key,nullzero,notnull"`
}

// View is an account as the API shows it.
type View struct {
	ID                int64     `json:"id" example:"4"`
	Status            string    `json:"status" enum:"Pending,Active,Failed,Deprovisioning,Deprovisioned" example:"Active"`
	ExternalAccountID string    `json:"externalAccountId" doc:"The cell's account id, once provisioned." example:"acc_9f2"`
	URL               string    `json:"url" doc:"Where the user signs in to their workflow-automation account." example:"https://flows.example.com/acc_9f2"`
	ErrorMessage      string    `json:"errorMessage" doc:"Why the last attempt failed: the cell's status and sanitised words, or what happened to a call without an answer."`
	CreatedAt         time.Time `json:"createdAt"`
	UpdatedAt         time.Time `json:"updatedAt"`
	UserID            int64     `json:"userId"`
}

func view(a *Account) View {
	return View{ID: a.ID, Status: a.Status, ExternalAccountID: a.ExternalAccountID, URL: a.URL, ErrorMessage: spec.Shown(&a.State),
		CreatedAt: a.CreatedAt.UTC(), UpdatedAt: a.UpdatedAt.UTC(), UserID: a.UserID}
}
