package dns

import (
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/provision"
)

// Record is a DNS record as stored: our own trace of every state.
type Record struct {
	bun.BaseModel `bun:"table:dns_records,alias:r"`

	Label            string `bun:"label,notnull"`
	Name             string `bun:"name,notnull"`
	Fqdn             string `bun:"fqdn,notnull"`
	Content          string `bun:"content,notnull"`
	RecordTTL        int    `bun:"record_ttl,notnull"`
	Proxied          bool   `bun:"proxied,notnull"`
	ProviderRecordID string `bun:"provider_record_id,notnull"`
	provision.State
	// MarkerToken is the random part of the comment (Marker) the row's provider record carries,
	// made by the database with the row (an insert leaves it to the column's default); "" (NULL)
	// for a row made before comments carried one.
	MarkerToken string `bun:"marker_token,nullzero"`
}

// View is a DNS record as the API shows it.
type View struct {
	ID               int64     `json:"id" example:"12"`
	Label            string    `json:"label" example:"myapp"`
	Fqdn             string    `json:"fqdn" example:"myapp.cell.example.com"`
	Content          string    `json:"content" example:"203.0.113.10"`
	RecordTTL        int       `json:"recordTtl" example:"1" doc:"The TTL the provider holds, in seconds; 1 is automatic (always so for a proxied record, whatever was asked)."`
	Proxied          bool      `json:"proxied"`
	Status           string    `json:"status" enum:"Pending,Active,Failed,Revoking,Revoked" example:"Active"`
	ProviderRecordID string    `json:"providerRecordId" doc:"The provider's id, once created."`
	ErrorMessage     string    `json:"errorMessage" doc:"The last failure: the provider's error codes and messages (redacted, bounded), or what happened to a call without an answer; empty when none."`
	CreatedAt        time.Time `json:"createdAt"`
	UpdatedAt        time.Time `json:"updatedAt"`
	UserID           int64     `json:"userId" doc:"The owner."`
}

func view(r *Record) View {
	return View{ID: r.ID, Label: r.Label, Fqdn: r.Fqdn, Content: r.Content, RecordTTL: r.RecordTTL, Proxied: r.Proxied,
		Status: r.Status, ProviderRecordID: r.ProviderRecordID, ErrorMessage: spec.Shown(&r.State), CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(), UserID: r.UserID}
}
