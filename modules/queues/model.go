package queues

import (
	"fmt"
	"net/url"
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/provision"
)

// Statuses of a queue space.
const (
	StatusProvisioning = "Provisioning" // in-between: being made at the broker
	StatusActive       = "Active"
	StatusFailed       = "Failed"
	StatusDeleting     = "Deleting" // in-between: being removed from the broker
	StatusDeleted      = "Deleted"
)

// spec is the spaces' lifecycle: Provisioning → Active or Failed; Deleting → Deleted.
var spec = provision.Spec{Name: Kind, Rows: "queue_spaces", Creating: StatusProvisioning, Active: StatusActive, Failed: StatusFailed,
	Deleting: StatusDeleting, Gone: StatusDeleted, Target: "queueSpace",
	Texts: provision.Texts{Internal: MsgInternal, Provider: []func(error) bool{provision.IsA[*BrokerError]}}}

// Space is a queue space as stored.
type Space struct {
	bun.BaseModel `bun:"table:queue_spaces,alias:q"`

	Name           string `bun:"name,notnull"`
	VHost          string `bun:"vhost,notnull"`
	Username       string `bun:"username,notnull"`
	PasswordSealed string `bun:"password_sealed,notnull"`
	// PasswordPending: the sealed password is not set at the broker yet (a takeover made it).
	PasswordPending bool `bun:"password_pending,notnull"`
	MaxConnections  int  `bun:"max_connections,notnull"`
	MaxQueues       int  `bun:"max_queues,notnull"`
	provision.State
}

// View is a queue space as the API shows it.
type View struct {
	ID             int64     `json:"id"`
	Name           string    `json:"name"`
	VHost          string    `json:"vhost"`
	Username       string    `json:"username"`
	AmqpURL        string    `json:"amqpUrl" doc:"No password."`
	Status         string    `json:"status" enum:"Provisioning,Active,Failed,Deleting,Deleted" example:"Active"`
	ErrorMessage   string    `json:"errorMessage"`
	MaxConnections int       `json:"maxConnections"`
	MaxQueues      int       `json:"maxQueues"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
}

// amqpURL is the address of s's virtual host for its user, with password when one is given.
func amqpURL(cfg Config, s *Space, password string) string {
	u := url.URL{Scheme: "amqp", Host: fmt.Sprintf("%s:%d", cfg.amqpHost(), cfg.AmqpPort), Path: "/" + s.VHost}
	u.User = url.User(s.Username)
	if password != "" {
		u.User = url.UserPassword(s.Username, password)
	}
	return u.String()
}

func view(cfg Config, s *Space) View {
	return View{ID: s.ID, Name: s.Name, VHost: s.VHost, Username: s.Username, AmqpURL: amqpURL(cfg, s, ""),
		Status: s.Status, ErrorMessage: spec.Shown(&s.State), MaxConnections: s.MaxConnections, MaxQueues: s.MaxQueues,
		CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC()}
}
