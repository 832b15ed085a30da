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
	Status string `query:"status" enum:"Provisioning,Active,Pausing,Paused,Resuming,Failed,Deleting,Deleted,Restoring" doc:"Only this status (Deleted ones are listed only when asked for)."`
	Engine string `query:"engine" enum:"postgres,mysql"`
	// Recoverable narrows to the deleted databases still in their recovery window.
	Recoverable bool `query:"recoverable" doc:"Only deleted databases still in their recovery window (restorable, with purgeAt)."`
}

type adminDeleteInput struct {
	ID    int64 `path:"id" minimum:"1" doc:"databaseInstanceId"`
	Purge bool  `query:"purge" doc:"Drop it now, with no recovery window (one already deleted too)."`
}

type adminCreateInput struct {
	Body struct {
		_            struct{} `additionalProperties:"true"`
		UserID       int64    `json:"userId" minimum:"1"`
		Engine       string   `json:"engine,omitempty" enum:"postgres,mysql"`
		Name         string   `json:"name,omitempty" maxLength:"63" pattern:"^[A-Za-z0-9 _.-]*$" doc:"A display name; by default the generated database name."`
		RotationDays int      `json:"rotationDays,omitempty" minimum:"0" maximum:"3650" doc:"Days between automatic password rotations; 0 (default): off."`
	}
}

type adminUpdateInput struct {
	ID   int64 `path:"id" minimum:"1"`
	Body struct {
		_             struct{} `additionalProperties:"true"`
		Name          *string  `json:"name,omitempty" minLength:"1" maxLength:"63" pattern:"^[A-Za-z0-9 _.-]*[A-Za-z0-9_.-][A-Za-z0-9 _.-]*$" patternDescription:"letters, digits, spaces and _.-, not blank" doc:"A display name; not blank (absent: left alone)."`
		MaxSpaceBytes *int64   `json:"maxSpaceBytes,omitempty" minimum:"1048576" doc:"The quota; over it the database becomes read-only."`
		RotationDays  *int     `json:"rotationDays,omitempty" minimum:"0" maximum:"3650" doc:"Days between automatic password rotations, counted from now; 0: off."`
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
		Username           string   `json:"username,omitempty" pattern:"^[a-z][a-z0-9_]{2,40}$" doc:"Default: generated from the database name. 409 if reserved, a tenant database's name or owner, or an existing role."`
		ReadOnly           bool     `json:"readOnly,omitempty" doc:"SELECT only (on PostgreSQL, no temporary tables or objects of its own either)."`
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
			p, err := h.svc.AdminList(ctx, AdminFilter{UserID: in.UserID, Status: in.Status, Engine: in.Engine,
				Recoverable: in.Recoverable, PageQuery: in.PageQuery})
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", p), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "getDatabaseInstance", Method: http.MethodGet,
		Path: "/api/database-instances/{id}", Tags: tags, Summary: "One database instance", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idInput) (*httpx.Response[Item], error) {
			inst, err := h.svc.get(ctx, in.ID, 0)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", h.svc.item(inst)), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "createDatabaseInstance", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/database-instances", Tags: tags, Summary: "Create a database for a user", DefaultStatus: http.StatusCreated,
		Description: "Like POST /api/me/databases on the user's behalf, without the per-user quota.",
		Errors:      []int{http.StatusNotFound, http.StatusBadGateway}, Responses: engineFailed},
		func(ctx context.Context, in *adminCreateInput) (*httpx.Response[Item], error) {
			return h.created(ctx, CreateInput{UserID: in.Body.UserID, Engine: in.Body.Engine, Name: in.Body.Name, SkipQuota: true,
				RotationDays: in.Body.RotationDays})
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "updateDatabaseInstance", Metadata: httpx.PerUserLimit("Provision"), Method: http.MethodPut,
		Path: "/api/database-instances/{id}", Tags: tags, Summary: "Rename a database, change its quota or rotation schedule",
		Description: "Absent fields are left alone; a new `maxSpaceBytes` applies at the next usage refresh. 409 during another " +
			"change.",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *adminUpdateInput) (*httpx.Response[Item], error) {
			inst, err := h.svc.Update(ctx, in.ID, in.Body.Name, in.Body.MaxSpaceBytes, in.Body.RotationDays)
			if err != nil {
				return nil, err
			}
			return httpx.OK("Database updated", h.svc.item(inst)), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "deleteDatabaseInstance", Metadata: httpx.PerUserLimit("Provision"), Method: http.MethodDelete,
		Path: "/api/database-instances/{id}", Tags: tags, Summary: "Delete a database",
		Description: "As the owner's DELETE; `purge=true` drops it, its roles and credentials at once, one in its recovery " +
			"window too (audited). 502 when the engine failed (retried in the background); 409 during another change.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: engineFailed},
		func(ctx context.Context, in *adminDeleteInput) (*httpx.Response[Item], error) {
			return h.deleted(ctx, in.ID, 0, in.Purge)
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
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "createAccessCredential", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/access-credentials", Tags: ctags, Summary: "Add a login role to a database", DefaultStatus: http.StatusCreated,
		Description: "The password is in this answer only. 409 when the database is not Active or Paused or is being changed, " +
			"or the username is taken.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: engineFailedNoData},
		func(ctx context.Context, in *credCreateInput) (*httpx.Response[CredentialView], error) {
			v, err := h.creds.Create(ctx, in.Body.DatabaseInstanceID, in.Body.Username, in.Body.ReadOnly)
			if err != nil {
				return nil, err
			}
			return httpx.Created("Access credential created; the password is shown once", *v), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "rotateAccessCredential", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPut,
		Path: "/api/access-credentials/{id}", Tags: ctags, Summary: "Rotate an access credential's password",
		Description: "`{rotatePassword: true}` sets a new password, in this answer only. 409 when not Active or during another " +
			"change.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: engineFailedNoData},
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
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "deleteAccessCredential", Metadata: httpx.PerUserLimit("Provision"), Method: http.MethodDelete,
		Path: "/api/access-credentials/{id}", Tags: ctags, Summary: "Remove an access credential",
		Description: "Drops the credential's login role. 502 when the engine failed (retried in the background); 409 during " +
			"another change.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: engineFailed},
		func(ctx context.Context, in *idInput) (*httpx.Response[httpx.NoData], error) {
			cr, o, err := h.creds.Delete(ctx, in.ID)
			if _, err := httpx.Driven(cr, o, err, h.creds.view, httpx.Answers{
				Failed: "The database engine refused to drop the credential; it stays Deleting and is retried in the background"}); err != nil {
				return nil, err
			}
			return httpx.Done("Access credential removed"), nil
		})
}
