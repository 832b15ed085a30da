package admin

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/audit"
	"provisioner/platform/httpx"
	"provisioner/platform/secrets"
)

// Handler serves /api/users*, /api/audit-events*, the per-user dashboard and the platform metrics.
type Handler struct {
	users    *Users
	events   *AuditEvents
	overview *Overview
}

type idPath struct {
	ID int64 `path:"id" minimum:"1" doc:"User id."`
}

type listUsersInput struct {
	httpx.PageQuery
	Search string `query:"search" maxLength:"200" doc:"Matches name or email, case-insensitively."`
	Role   string `query:"role" enum:"User,Admin" doc:"Only users with this role."`
}

type createUserInput struct {
	Body struct {
		_            struct{}       `additionalProperties:"true"`
		FullName     httpx.FullName `json:"fullName"`
		Organization string         `json:"organization,omitempty" maxLength:"200"`
		Email        string         `json:"email" format:"idn-email" maxLength:"254"`
		Password     string         `json:"password" minLength:"8" maxLength:"512" doc:"Same rules as the password of POST /api/auth/register."`
		Role         string         `json:"role,omitempty" enum:"User,Admin" default:"User"`
	}
}

// Resolve checks what the schema cannot, alongside it: a 400 lists a password whose NFKC form is
// too short, too long or common (secrets.PasswordProblem), or a fullName of white space only, with
// the schema's errors.
func (in *createUserInput) Resolve(huma.Context) []error {
	var errs []error
	if msg := secrets.PasswordProblem(in.Body.Password); in.Body.Password != "" && msg != "" { // an empty one is the schema's
		errs = append(errs, httpx.Invalid("password", msg))
	}
	return append(errs, httpx.PersonTexts((*string)(&in.Body.FullName), &in.Body.Organization)...)
}

// Resolve checks what the schema cannot, alongside it: a fullName of white space only, and
// control, bidi or invisible format characters in the names.
func (in *updateUserInput) Resolve(huma.Context) []error {
	return httpx.PersonTexts((*string)(in.Body.FullName), in.Body.Organization)
}

type updateUserInput struct {
	ID   int64 `path:"id" minimum:"1"`
	Body struct {
		_            struct{}        `additionalProperties:"true"`
		FullName     *httpx.FullName `json:"fullName,omitempty"`
		Organization *string         `json:"organization,omitempty" maxLength:"200"`
		Email        *string         `json:"email,omitempty" format:"idn-email" maxLength:"254"`
		Role         *string         `json:"role,omitempty" enum:"User,Admin"`
		// AiMonthlyTokenBudget is a users column the aikeys module reads (modules do not import
		// each other): see modules/admin/README.md.
		AiMonthlyTokenBudget *int64 `json:"aiMonthlyTokenBudget,omitempty" minimum:"0" doc:"Tokens per calendar month (UTC) all the user's AI keys may spend together; 0 clears."`
	}
}

type dashboardInput struct {
	UserID int64 `path:"userId" minimum:"1"`
}

type listEventsInput struct {
	httpx.PageQuery
	UserID int64     `query:"userId" minimum:"0" doc:"Only events about this user."`
	Action string    `query:"action" maxLength:"100" doc:"Only this action, e.g. database.password.revealed."`
	From   time.Time `query:"from" doc:"Only events at or after this ISO 8601 time (from 0001-01-01T00:00:00Z)."`
	To     time.Time `query:"to" doc:"Only events before this ISO 8601 time (from 0001-01-01T00:00:00Z, before which there are none)."`
	// toGiven tells a to of 0001-01-01T00:00:00Z (nothing is before it) from no to at all: both
	// read as the zero time.
	toGiven bool
}

// earliestFilterTime is the earliest from/to of the audit list: an earlier time (such as
// 0001-01-01T00:00:00+01:00, in year 0 in UTC) goes to PostgreSQL with year 0000, which it refuses
// (it has no year 0: 1 BC precedes AD 1).
var earliestFilterTime = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)

// Resolve refuses a from or to before 0001-01-01T00:00:00Z (400 naming it; it answered 500).
func (in *listEventsInput) Resolve(ctx huma.Context) []error {
	u := ctx.URL()
	in.toGiven = u.Query().Has("to")
	var errs []error
	for _, f := range []struct {
		name string
		t    time.Time
	}{{"from", in.From}, {"to", in.To}} {
		if !f.t.IsZero() && f.t.Before(earliestFilterTime) {
			errs = append(errs, &huma.ErrorDetail{Location: "query." + f.name, Message: "must be at or after 0001-01-01T00:00:00Z", Value: f.t.Format(time.RFC3339Nano)})
		}
	}
	return errs
}

type eventPath struct {
	ID int64 `path:"id" minimum:"1" doc:"Audit event id."`
}

type noteBody struct {
	_          struct{}       `additionalProperties:"true"`
	Action     string         `json:"action" minLength:"1" maxLength:"100" pattern:"^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$" patternDescription:"plain ASCII: words of letters, digits, _ and - joined by single dots, e.g. note.manual" example:"note.manual" doc:"Plain ASCII: words of letters, digits, _ and - joined by single dots (^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$), not in a namespace of the service's own events (user.*, aikey.*, …)."`
	TargetType string         `json:"targetType,omitempty" maxLength:"100"`
	TargetID   string         `json:"targetId,omitempty" maxLength:"100"`
	UserID     *int64         `json:"userId,omitempty" minimum:"1" doc:"The user the note is about: one the service has or had (a deleted account counts); any other id is a 400."`
	Details    map[string]any `json:"details,omitempty" doc:"At most 32 levels deep and 64 KiB as JSON; numbers within ±2^53-1 (send larger ones as strings)."`
}

type createEventInput struct {
	Body noteBody
}

// Resolve refuses control, bidi and invisible format characters in the texts audit lists show.
func (in *createEventInput) Resolve(huma.Context) []error {
	return displayTexts(map[string]*string{"action": &in.Body.Action, "targetType": &in.Body.TargetType, "targetId": &in.Body.TargetID})
}

// Resolve refuses control, bidi and invisible format characters in the texts audit lists show.
func (in *updateEventInput) Resolve(huma.Context) []error {
	return displayTexts(map[string]*string{"action": in.Body.Action, "targetType": in.Body.TargetType, "targetId": in.Body.TargetID})
}

// displayTexts checks each given (non-nil) text with httpx.DisplayTextProblem, in field order.
func displayTexts(texts map[string]*string) []error {
	var errs []error
	for _, f := range []string{"action", "targetType", "targetId"} {
		if v := texts[f]; v != nil {
			if msg := httpx.DisplayTextProblem(*v); msg != "" {
				errs = append(errs, httpx.Invalid(f, msg))
			}
		}
	}
	return errs
}

type updateEventInput struct {
	ID   int64 `path:"id" minimum:"1"`
	Body struct {
		_          struct{}       `additionalProperties:"true"`
		Action     *string        `json:"action,omitempty" minLength:"1" maxLength:"100" pattern:"^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$" patternDescription:"plain ASCII: words of letters, digits, _ and - joined by single dots, e.g. note.manual" doc:"A new action: as on create, plain dotted ASCII outside the service's namespaces."`
		TargetType *string        `json:"targetType,omitempty" maxLength:"100"`
		TargetID   *string        `json:"targetId,omitempty" maxLength:"100"`
		Details    map[string]any `json:"details,omitempty" doc:"At most 32 levels deep and 64 KiB as JSON; numbers within ±2^53-1 (send larger ones as strings)."`
	}
}

// Register implements httpx.Routes.
func (h *Handler) Register(api *httpx.API) {
	users := []string{"Admin: users"}
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "listUsers", Method: http.MethodGet, Path: "/api/users",
		Tags: users, Summary: "List users", Description: "Newest first; `search` matches name or email."},
		func(ctx context.Context, in *listUsersInput) (*httpx.Response[httpx.Page[User]], error) {
			p, err := h.users.List(ctx, UserFilter{Search: in.Search, Role: in.Role, PageQuery: in.PageQuery})
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", p), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "getUser", Method: http.MethodGet, Path: "/api/users/{id}",
		Tags: users, Summary: "One user", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *idPath) (*httpx.Response[User], error) {
			u, err := h.users.Get(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", viewUser(u)), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "createUser", Method: http.MethodPost, Path: "/api/users",
		Tags: users, Summary: "Create a user", DefaultStatus: http.StatusCreated, Errors: []int{http.StatusConflict}},
		func(ctx context.Context, in *createUserInput) (*httpx.Response[User], error) {
			b := in.Body
			u, err := h.users.Create(ctx, CreateUserInput{FullName: string(b.FullName), Organization: b.Organization,
				Email: b.Email, Password: b.Password, Role: b.Role})
			if err != nil {
				return nil, err
			}
			return httpx.Created("User created", viewUser(u)), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "updateUser", Method: http.MethodPut, Path: "/api/users/{id}",
		Tags: users, Summary: "Update a user",
		Description: "Absent fields are left alone; a role change applies on the user's next request. The last Admin cannot be " +
			"demoted (409). `aiMonthlyTokenBudget` caps the user's AI keys together (in force once answered).",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *updateUserInput) (*httpx.Response[User], error) {
			b := in.Body
			u, err := h.users.Update(ctx, in.ID, UpdateUserInput{FullName: (*string)(b.FullName), Organization: b.Organization, Email: b.Email, Role: b.Role,
				AiMonthlyTokenBudget: b.AiMonthlyTokenBudget})
			if err != nil {
				return nil, err
			}
			return httpx.OK("User updated", viewUser(u)), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "deleteUser", Method: http.MethodDelete, Path: "/api/users/{id}",
		Tags: users, Summary: "Delete a user",
		Description: "The user can no longer sign in; their resources are deprovisioned in the background. The last Admin " +
			"cannot be deleted (409).",
		Errors: []int{http.StatusNotFound, http.StatusConflict}},
		func(ctx context.Context, in *idPath) (*httpx.Response[httpx.NoData], error) {
			if err := h.users.Delete(ctx, in.ID); err != nil {
				return nil, err
			}
			return httpx.Done("User deleted; their resources are being deprovisioned"), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "getUserDashboard", Method: http.MethodGet,
		Path: "/api/users/{userId}/dashboard", Tags: users, Summary: "A user's resources across every module",
		Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *dashboardInput) (*httpx.Response[Dashboard], error) {
			u, err := h.users.Get(ctx, in.UserID)
			if err != nil {
				return nil, err
			}
			d, err := h.overview.DashboardFor(ctx, viewUser(u))
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", *d), nil
		})

	events := []string{"Admin: audit events"}
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "listAuditEvents", Method: http.MethodGet, Path: "/api/audit-events",
		Tags: events, Summary: "List audit events", Description: "Newest first; filters combine."},
		func(ctx context.Context, in *listEventsInput) (*httpx.Response[httpx.Page[audit.Event]], error) {
			p, err := h.events.List(ctx, AuditFilter{UserID: in.UserID, Action: in.Action, From: in.From, To: in.To, ToGiven: in.toGiven, PageQuery: in.PageQuery})
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", p), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "getAuditEvent", Method: http.MethodGet, Path: "/api/audit-events/{id}",
		Tags: events, Summary: "One audit event", Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *eventPath) (*httpx.Response[audit.Event], error) {
			e, err := h.events.Get(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", *e), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "createAuditEvent", Method: http.MethodPost, Path: "/api/audit-events",
		Tags: events, Summary: "Record a manual note", DefaultStatus: http.StatusCreated,
		Description: "Stored with `details.manual: true`. 400 (naming the field) for an `action` of the service's own " +
			"namespaces, `details` too large, or control characters."},
		func(ctx context.Context, in *createEventInput) (*httpx.Response[audit.Event], error) {
			b := in.Body
			e, err := h.events.Create(ctx, NoteInput{Action: &b.Action, TargetType: &b.TargetType, TargetID: &b.TargetID,
				Details: b.Details, UserID: b.UserID})
			if err != nil {
				return nil, err
			}
			return httpx.Created("Audit event recorded", *e), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "updateAuditEvent", Method: http.MethodPut, Path: "/api/audit-events/{id}",
		Tags: events, Summary: "Amend an audit event",
		Description: "Recorded as a new `audit.event.updated` event holding the original, with the limits of a new note; the " +
			"event gets `details.amended: true`.",
		Errors: []int{http.StatusNotFound}},
		func(ctx context.Context, in *updateEventInput) (*httpx.Response[audit.Event], error) {
			b := in.Body
			e, err := h.events.Update(ctx, in.ID, NoteInput{Action: b.Action, TargetType: b.TargetType, TargetID: b.TargetID, Details: b.Details})
			if err != nil {
				return nil, err
			}
			return httpx.OK("Audit event updated", *e), nil
		})
	httpx.Register(api, httpx.AdminOnly, huma.Operation{OperationID: "deleteAuditEvent", Method: http.MethodDelete, Path: "/api/audit-events/{id}",
		Tags: events, Summary: "Delete an audit event",
		Description: "The deletion is itself recorded as a new `audit.event.deleted` event holding the original.",
		Errors:      []int{http.StatusNotFound}},
		func(ctx context.Context, in *eventPath) (*httpx.Response[httpx.NoData], error) {
			if err := h.events.Delete(ctx, in.ID); err != nil {
				return nil, err
			}
			return httpx.Done("Audit event deleted"), nil
		})

	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "getPlatformMetrics", Method: http.MethodGet, Path: "/api/metrics/platform",
		Tags: []string{"Public"}, Summary: "Platform counts for the landing page", Description: "Cached for at most 60 s."},
		func(ctx context.Context, _ *struct{}) (*httpx.Response[PlatformMetrics], error) {
			m, err := h.overview.Metrics(ctx)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", m), nil
		})
}
