package databases

import (
	"time"

	"github.com/uptrace/bun"

	"provisioner/platform/provision"
)

// Statuses of a database instance.
const (
	StatusProvisioning = "Provisioning"
	StatusActive       = "Active"
	StatusPausing      = "Pausing" // in-between: the finisher refuses the logins on the engine
	StatusPaused       = "Paused"
	StatusResuming     = "Resuming" // in-between: the finisher allows the logins again
	StatusFailed       = "Failed"
	StatusDeleting     = "Deleting" // in-between: the finisher drops it on the engine
	StatusDeleted      = "Deleted"
	// StatusRecoverable is a deleted database in its recovery window (shown as Deleted, with
	// purgeAt): logins refused, kept on its engine, dropped by the finisher at purge_at.
	StatusRecoverable = "Recoverable"
	StatusRestoring   = "Restoring" // in-between: the finisher allows the logins of a restored database again
)

// spec is the databases' lifecycle: Provisioning → Active or Failed; Pausing → Paused,
// Resuming or Restoring → Active (Between); Deleting → Recoverable (in its recovery window, due
// at purge_at) or Deleted. Deleting and Recoverable rows do not count against the quota.
var spec = provision.Spec{Name: Kind, Rows: "database_instances", Creating: StatusProvisioning, Active: StatusActive,
	Failed: StatusFailed, Deleting: StatusDeleting, Gone: StatusDeleted,
	Between: map[string]provision.Verb{StatusPausing: provision.VerbSuspend, StatusResuming: provision.VerbResume,
		StatusRestoring: provision.VerbResume},
	Due: map[string]provision.Verb{StatusRecoverable: provision.VerbDelete},
	Counted: []string{StatusProvisioning, StatusActive, StatusPausing, StatusPaused, StatusResuming, StatusFailed,
		StatusRestoring},
	Texts: engineTexts}

// engineTexts are the texts of every kind of this module: an engine's failure as stored, any
// other error as MsgInternal.
var engineTexts = provision.Texts{Internal: MsgInternal, Provider: []func(error) bool{provision.IsA[*EngineError], provision.IsA[*provision.Deferred]}}

// Instance is a tenant database as stored.
type Instance struct {
	bun.BaseModel `bun:"table:database_instances,alias:di"`

	Name           string     `bun:"name,notnull"`
	Engine         string     `bun:"engine,notnull"`
	DatabaseName   string     `bun:"database_name,notnull"`
	DatabaseUser   string     `bun:"database_user,notnull"`
	PasswordSealed string     `bun:"password_sealed,notnull"`
	MaxSpaceBytes  int64      `bun:"max_space_bytes,notnull"`
	UsedSpaceBytes int64      `bun:"used_space_bytes,notnull"`
	ReadOnly       bool       `bun:"read_only,notnull"`
	ReadOnlyReason string     `bun:"read_only_reason,notnull"`
	LastActivity   *time.Time `bun:"last_activity"`
	DeletedAt      *time.Time `bun:"deleted_at"`
	// PurgeAt is when a deleted database is dropped (its recovery window ends); nil once dropped or
	// when deleted without a window.
	PurgeAt *time.Time `bun:"purge_at"`
	// LoginUser is the login role whose password is stored ("" = DatabaseUser; see Login).
	LoginUser string `bun:"login_user,notnull"`
	// RotationDays > 0 rotates the password on that schedule (a Scheduled rotation row).
	RotationDays int `bun:"rotation_days,notnull"`
	provision.State
}

// Item is a database as the API shows it. The password is never part of it.
type Item struct {
	DatabaseInstanceID int64      `json:"databaseInstanceId" example:"42"`
	Name               string     `json:"name" example:"analytics"`
	Engine             string     `json:"engine" enum:"postgres,mysql" example:"postgres"`
	Host               string     `json:"host" example:"db.example.com"`
	Port               int        `json:"port" example:"5432"`
	DatabaseName       string     `json:"databaseName" example:"u7_k3x9q2ab5mw"`
	DatabaseUser       string     `json:"databaseUser" example:"u7_k3x9q2ab5mw"`
	Status             string     `json:"status" enum:"Provisioning,Active,Pausing,Paused,Resuming,Failed,Deleting,Deleted,Restoring" example:"Active" doc:"Pausing, Resuming, Deleting and Restoring: the change is being made on the engine, or retried in the background. Deleted with purgeAt: restorable until then."`
	UsedSpaceBytes     int64      `json:"usedSpaceBytes" example:"8404992" doc:"Space the database takes (data, indexes and its catalogue text), measured every usage refresh."`
	MaxSpaceBytes      int64      `json:"maxSpaceBytes" example:"536870912"`
	ReadOnly           bool       `json:"readOnly" doc:"True while over its quota (until back under 90%) or, on MySQL/MariaDB, while it has a table whose size the server does not report; readOnlyReason says which."`
	ReadOnlyReason     string     `json:"readOnlyReason,omitempty" example:"Over its quota" doc:"Why the database is read-only, as of the last usage refresh; absent while writable."`
	LastActivity       *time.Time `json:"lastActivity" doc:"The last time a tenant session was seen or the database grew, as of a usage refresh; null if never."`
	ErrorMessage       string     `json:"errorMessage,omitempty" doc:"Why the last attempt failed, by its class only (e.g. \"drop: engine timed out\"); details are in the server log."`
	CreatedAt          time.Time  `json:"createdAt"`
	UserID             int64      `json:"userId" doc:"The owner."`
	PurgeAt            *time.Time `json:"purgeAt,omitempty" doc:"A deleted database's end of recovery: until then POST …/restore brings it back, then it is dropped."`
	RotationDays       int        `json:"rotationDays" doc:"Days between automatic password rotations; 0: off."`
}

// Statuses of an access credential. Creating and Deleting are in-between: the request that set
// them does the engine work itself, and the finisher finishes what a crash or a failed call left.
// A Creating row the finisher finds is undone (its role dropped), never completed: the client
// never got the password, which is shown once.
const (
	CredentialCreating = "Creating"
	CredentialActive   = "Active"
	CredentialDeleting = "Deleting"
	CredentialDeleted  = "Deleted"
)

// credentialSpec is the credentials' lifecycle: made by their request only (a Creating row the
// finisher finds is undone), Active, Deleting → Deleted.
var credentialSpec = provision.Spec{Name: CredentialKind, Rows: "access_credentials", Active: CredentialActive,
	Deleting: CredentialDeleting, Gone: CredentialDeleted, Texts: engineTexts,
	Between: map[string]provision.Verb{CredentialCreating: provision.VerbDelete}}

// Credential is an extra login role on a tenant database.
type Credential struct {
	bun.BaseModel `bun:"table:access_credentials,alias:ac"`

	ID                 int64  `bun:"id,pk,autoincrement"`
	DatabaseInstanceID int64  `bun:"database_instance_id,notnull"`
	Username           string `bun:"username,notnull"`
	PasswordSealed     string `bun:"password_sealed,notnull"`
	ReadOnly           bool   `bun:"read_only,notnull"`
	// MarkerToken is the random part of the mark (CredentialMarker) the credential's role carries
	// on its engine, made by the database with the row (an insert leaves it to the column's
	// default); "" (NULL) for a credential made before marks carried one.
	MarkerToken string `bun:"marker_token,nullzero"`
	rowState
}

// rowState is the lifecycle state of a row that belongs to a database rather than to a user
// (credentials, rotations): provision.State without its owner.
type rowState struct {
	Status       string `bun:"status,notnull"`
	ErrorMessage string `bun:"error_message,notnull"`
	provision.Retries
	CreatedAt time.Time `bun:"created_at,nullzero,notnull,default:current_timestamp"`
	UpdatedAt time.Time `bun:"updated_at,nullzero,notnull,default:current_timestamp"`
}

// lifecycle is s as provision.Run reads it, for row id.
func (s *rowState) lifecycle(id int64) *provision.State {
	return &provision.State{ID: id, Status: s.Status, ErrorMessage: s.ErrorMessage, Retries: s.Retries}
}

// Lifecycle implements provision.Stateful.
func (c *Credential) Lifecycle() *provision.State { return c.lifecycle(c.ID) }

// CredentialView is an access credential as the API shows it; Password only in the answers of
// create and rotate.
type CredentialView struct {
	ID                 int64     `json:"id" example:"3"`
	DatabaseInstanceID int64     `json:"databaseInstanceId" example:"42"`
	Username           string    `json:"username" example:"u7_k3x9q2ab5mw_ro1"`
	ReadOnly           bool      `json:"readOnly"`
	Status             string    `json:"status" enum:"Creating,Active,Deleting" doc:"Creating or Deleting: in progress, or retried in the background; a Deleting credential cannot be rotated."`
	CreatedAt          time.Time `json:"createdAt"`
	UpdatedAt          time.Time `json:"updatedAt"`
	Password           string    `json:"password,omitempty" doc:"Shown once, in the answers of create and rotate."`
	ConnectionString   string    `json:"connectionString,omitempty" doc:"Shown once, with the password."`
}

// Reveal is the answer of GET /api/me/databases/{id}/password.
type Reveal struct {
	DatabaseUser     string `json:"databaseUser"`
	Password         string `json:"password"`
	ConnectionString string `json:"connectionString"`
}
