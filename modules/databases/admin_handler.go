package databases

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/httpx"
)

type adminListInput struct {
	httpx.PageQuery
	UserID int64  `query:"userId" minimum:"0" doc:"Only this user's databases."`
	Status string `query:"status" enum:"Provisioning,Active,Pausing,Paused,Resuming,Failed,Deleting,Deleted" doc:"Only this status (Deleted ones are listed only when asked for)."`
	Engine string `query:"engine" enum:"postgres,mysql"`
}

type adminCreateInput struct {
	Body struct {
		_      struct{} `additionalProperties:"true"`
		UserID int64    `json:"userId" minimum:"1"`
		Engine string   `json:"engine,omitempty" enum:"postgres,mysql"`
		Name   string   `json:"name,omitempty" maxLength:"63" pattern:"^[A-Za-z0-9 _.-]*$" doc:"A display name. Omitted, empty or white space only: the generated database name is the display name too (surrounding spaces are trimmed)."`
	}
}

type adminUpdateInput struct {
	ID   int64 `path:"id" minimum:"1"`
	Body struct {
		_             struct{} `additionalProperties:"true"`
		Name          *string  `json:"name,omitempty" minLength:"1" maxLength:"63" pattern:"^[A-Za-z0-9 _.-]*[A-Za-z0-9_.-][A-Za-z0-9 _.-]*$" patternDescription:"letters, digits, spaces and _.-, not blank" doc:"A display name; not blank (absent: left alone)."`
		MaxSpaceBytes *int64   `json:"maxSpaceBytes,omitempty" minimum:"1048576" doc:"The quota; over it the database becomes read-only."`
	}
}

type credListInput struct {
	httpx.PageQuery
	DatabaseInstanceID int64 `query:"databaseInstanceId" minimum:"0"`
}

type credCreateInput struct {
	Body struct {
		_                  struct{} `additionalProperties:"true"`
		DatabaseInstanceID int64    `json:"databaseInstanceId" minimum:"1"`
		Username           string   `json:"username,omitempty" pattern:"^[a-z][a-z0-9_]{2,40}$" doc:"Default: generated from the database name. 409 if reserved (postgres, root, pg_*, mysql*, …), a tenant database's name or owner, or an existing role or user on the engine."`
		ReadOnly           bool     `json:"readOnly,omitempty" doc:"SELECT only: on PostgreSQL no temporary tables, no tables of its own and no large objects either, even with its session's default_transaction_read_only switched off."`
	}
}

type credUpdateInput struct {
	ID   int64 `path:"id" minimum:"1"`
	Body struct {
		_              struct{} `additionalProperties:"true"`
		RotatePassword bool     `json:"rotatePassword" enum:"true" doc:"Must be true: sets a new password, shown once in the answer."`
	}
}

// Resolve checks what the schema cannot, alongside it.
func (in *credUpdateInput) Resolve(huma.Context) []error {
	if !in.Body.RotatePassword {
		return []error{httpx.Invalid("rotatePassword", "must be true")}
	}
	return nil
}

func (h *Handler) registerAdmin(api *httpx.API) {
	tags := []string{"Admin: database instances"}

	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "listDatabaseInstances", Method: http.MethodGet,
		Path: "/api/database-instances", Tags: tags, Summary: "List database instances"},
		func(ctx context.Context, in *adminListInput) (*httpx.Response[httpx.Page[Item]], error) {
			p, err := h.svc.AdminList(ctx, AdminFilter{UserID: in.UserID, Status: in.Status, Engine: in.Engine, PageQuery: in.PageQuery})
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", p), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "getDatabaseInstance", Method: http.MethodGet,
		Path: "/api/database-instances/{id}", Tags: tags, Summary: "One database instance", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idInput) (*httpx.Response[Item], error) {
			inst, err := h.svc.get(ctx, h.svc.db, in.ID, 0)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", h.svc.item(inst)), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "createDatabaseInstance", Method: http.MethodPost, Metadata: httpx.Idempotent(),
		Path: "/api/database-instances", Tags: tags, Summary: "Create a database for a user", DefaultStatus: http.StatusCreated,
		Description: "Like POST /api/me/databases on the user's behalf, without the per-user quota.",
		Errors:      []int{http.StatusNotFound, http.StatusBadGateway}},
		func(ctx context.Context, in *adminCreateInput) (*httpx.Response[Item], error) {
			return h.created(ctx, CreateInput{UserID: in.Body.UserID, Engine: in.Body.Engine, Name: in.Body.Name, SkipQuota: true})
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "updateDatabaseInstance", Method: http.MethodPut,
		Path: "/api/database-instances/{id}", Tags: tags, Summary: "Rename a database or change its quota",
		Description: "Absent fields are left alone; `database.updated` records the fields that change (the name as stored, trimmed), and a change that leaves the database as it is records nothing. A new `maxSpaceBytes` applies at the next usage refresh (read-only over it). " +
			"409 while another change of the database is in progress (try again).",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *adminUpdateInput) (*httpx.Response[Item], error) {
			inst, err := h.svc.Update(ctx, in.ID, in.Body.Name, in.Body.MaxSpaceBytes)
			if err != nil {
				return nil, err
			}
			return httpx.OK("Database updated", h.svc.item(inst)), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "deleteDatabaseInstance", Method: http.MethodDelete,
		Path: "/api/database-instances/{id}", Tags: tags, Summary: "Delete a database",
		Description: "Drops the database, its role and its access credentials on the engine (on PostgreSQL the roles' logins are refused first, and what other databases grant them or they own there is revoked or given to their owners, so no other tenant can keep them from being dropped). 502 when the engine failed: the database stays Deleting and is retried in the background, or by deleting it again. " +
			"409 while another change of the database is in progress (try again), a DELETE still under way included: of DELETEs sent at once one answers 200, the others 409 (or 404 once it is deleted).",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}},
		func(ctx context.Context, in *idInput) (*httpx.Response[Item], error) {
			return h.deleted(ctx, in.ID, 0)
		})

	ctags := []string{"Admin: access credentials"}
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "listAccessCredentials", Method: http.MethodGet,
		Path: "/api/access-credentials", Tags: ctags, Summary: "List access credentials", Description: "Never the passwords."},
		func(ctx context.Context, in *credListInput) (*httpx.Response[httpx.Page[CredentialView]], error) {
			p, err := h.creds.List(ctx, in.DatabaseInstanceID, in.PageQuery)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", p), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "getAccessCredential", Method: http.MethodGet,
		Path: "/api/access-credentials/{id}", Tags: ctags, Summary: "One access credential", Description: "Never the password.",
		Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idInput) (*httpx.Response[CredentialView], error) {
			cr, err := h.creds.Get(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", h.creds.view(cr)), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "createAccessCredential", Method: http.MethodPost, Metadata: httpx.Idempotent(),
		Path: "/api/access-credentials", Tags: ctags, Summary: "Add a login role to a database", DefaultStatus: http.StatusCreated,
		Description: "The password is in this answer only. A create cut short (the service stopped before answering) leaves the credential Creating for a minute at most; the background finisher then drops its role and removes it, so create it again. On a Paused database the credential is made login-blocked; resume lets it in. " +
			"409 when the database is not Active or Paused, while it is being changed (try again), or when the username is reserved or taken.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}},
		func(ctx context.Context, in *credCreateInput) (*httpx.Response[CredentialView], error) {
			v, err := h.creds.Create(ctx, in.Body.DatabaseInstanceID, in.Body.Username, in.Body.ReadOnly)
			if err != nil {
				return nil, err
			}
			return httpx.Created("Access credential created; the password is shown once", *v), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "rotateAccessCredential", Method: http.MethodPut, Metadata: httpx.Idempotent(),
		Path: "/api/access-credentials/{id}", Tags: ctags, Summary: "Rotate an access credential's password",
		Description: "`{rotatePassword: true}` sets a new password, in this answer only. 409 when the credential is not Active (Creating or Deleting), when the role on the engine was not made for this credential (it is left alone; a role made for it before roles were marked is recognised by its footprint and marked), or while another change of this credential or its database is in progress (one rotation at a time; try again). " +
			"On a Paused database the credential stays login-blocked.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}},
		func(ctx context.Context, in *credUpdateInput) (*httpx.Response[CredentialView], error) {
			if !in.Body.RotatePassword {
				return nil, httpx.BadRequest("Validation failed", httpx.FieldError{Field: "rotatePassword", Message: "must be true"})
			}
			v, err := h.creds.Rotate(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("Password rotated; it is shown once", *v), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "deleteAccessCredential", Method: http.MethodDelete,
		Path: "/api/access-credentials/{id}", Tags: ctags, Summary: "Remove an access credential",
		Description: "Drops the credential's login role on the engine, only if it was made for this credential (a role of that name that was not is left alone). What it created there (tables of a full-access credential) stays and belongs to the database's owner. " +
			"502 when the engine failed: the credential stays Deleting (in the answer's data; it can no longer be rotated) and the drop is retried in the background, or by deleting it again. " +
			"409 while another change of this credential is in progress (try again), a DELETE still under way included: of DELETEs sent at once one answers 200, the others 409; 404 once it is deleted.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}},
		func(ctx context.Context, in *idInput) (*httpx.Response[httpx.NoData], error) {
			if err := h.creds.Delete(ctx, in.ID); err != nil {
				return nil, err
			}
			return httpx.Done("Access credential removed"), nil
		})
}
