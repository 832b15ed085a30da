package databases

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
	"provisioner/platform/ratelimit"
)

// Handler serves /api/engines, /api/me/databases*, /api/database-instances* and
// /api/access-credentials*.
type Handler struct {
	svc     *Service
	creds   *Credentials
	engines *Engines
	limiter *ratelimit.Limiter

	mu       sync.Mutex
	catalog  []EngineInfo
	cachedAt time.Time
}

// EngineInfo is one configured engine.
type EngineInfo struct {
	ID            string `json:"id" enum:"postgres,mysql" example:"postgres"`
	Name          string `json:"name" example:"PostgreSQL"`
	Version       string `json:"version" doc:"Live server version; empty while the server does not answer." example:"15.19"`
	Available     bool   `json:"available" doc:"Whether the server answered just now."`
	Default       bool   `json:"default" doc:"Used when a request names no engine."`
	MaxSpaceBytes int64  `json:"maxSpaceBytes" example:"536870912"`
}

type createInput struct {
	Body *struct {
		_      struct{} `additionalProperties:"true"`
		Engine string   `json:"engine,omitempty" enum:"postgres,mysql" doc:"Default: the configured default engine."`
		Name   string   `json:"name,omitempty" maxLength:"63" pattern:"^[A-Za-z0-9 _.-]*$" doc:"A display name; the database and role names are generated. Omitted, empty or white space only: the generated database name is the display name too (surrounding spaces are trimmed)."`
	}
}

type idInput struct {
	ID int64 `path:"id" minimum:"1" doc:"databaseInstanceId"`
}

func (h *Handler) engineCatalog(ctx context.Context) []EngineInfo {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.catalog != nil && time.Since(h.cachedAt) < 5*time.Second {
		return h.catalog
	}
	out := []EngineInfo{}
	for _, e := range h.engines.All() {
		vctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, err := e.Version(vctx)
		cancel()
		out = append(out, EngineInfo{ID: e.ID(), Name: e.Name(), Version: v, Available: err == nil,
			Default: e.ID() == h.engines.Default(), MaxSpaceBytes: h.svc.cfg.Databases.DefaultMaxSpaceBytes})
	}
	h.catalog, h.cachedAt = out, time.Now()
	return out
}

// Register implements httpx.Routes.
func (h *Handler) Register(api *httpx.API) {
	tags := []string{"Databases"}
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "listEngines", Method: http.MethodGet, Path: "/api/engines",
		Tags: []string{"Public"}, Summary: "Catalogue of database engines",
		Description: "The configured engines with their live server version and whether each answers now."},
		func(ctx context.Context, _ *struct{}) (*httpx.Response[[]EngineInfo], error) {
			return httpx.OK("OK", h.engineCatalog(ctx)), nil
		})

	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "listMyDatabases", Method: http.MethodGet,
		Path: "/api/me/databases", Tags: tags, Summary: "List my databases", Description: "Deleted databases are not listed."},
		func(ctx context.Context, _ *struct{}) (*httpx.Response[[]Item], error) {
			items, err := h.svc.ListMine(ctx, authn.FromContext(ctx).UserID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", items), nil
		})

	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "createMyDatabase", Method: http.MethodPost, Metadata: httpx.Idempotent(),
		Path: "/api/me/databases", Tags: tags, Summary: "Create a database", DefaultStatus: http.StatusCreated,
		Description: "Creates a database and a login role of its own with a random password (reveal it with GET …/password). " +
			"201 with the Active database; 409 when the quota `Databases:MaxPerUser` is reached; 502 when the engine failed — " +
			"`data` is the database as stored (Provisioning, retried in the background, or Failed).",
		Errors: []int{http.StatusConflict, http.StatusBadGateway}},
		func(ctx context.Context, in *createInput) (*httpx.Response[Item], error) {
			ci := CreateInput{UserID: authn.FromContext(ctx).UserID}
			if in.Body != nil {
				ci.Engine, ci.Name = in.Body.Engine, in.Body.Name
			}
			return h.created(ctx, ci)
		})

	for _, v := range []struct {
		verb  string
		pause bool
	}{{"pause", true}, {"resume", false}} {
		httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: v.verb + "MyDatabase", Method: http.MethodPost, Metadata: httpx.Idempotent(),
			Path: "/api/me/databases/{id}/" + v.verb, Tags: tags, Summary: map[bool]string{true: "Pause a database", false: "Resume a database"}[v.pause],
			Description: map[bool]string{
				true: "Active → Pausing → Paused: the database's role and every access credential of it can no longer connect, and their open sessions are ended; " +
					"on PostgreSQL no other role can either (CONNECT the owner granted to PUBLIC or to other roles is revoked, not given back on resume) and every session on the database is ended. " +
					"502 when the engine failed: the database stays Pausing and the pause is finished in the background (asking again retries it). " +
					"409 in any other state, or while another change of the database is in progress (try again).",
				false: "Paused → Resuming → Active: the database's role and its Active access credentials can connect again. " +
					"502 when the engine failed: the database stays Resuming and the resume is finished in the background (asking again retries it). " +
					"409 in any other state, or while another change of the database is in progress (try again).",
			}[v.pause],
			Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}},
			func(ctx context.Context, in *idInput) (*httpx.Response[Item], error) {
				inst, err := h.svc.SetPaused(ctx, in.ID, authn.FromContext(ctx).UserID, v.pause)
				if inst == nil {
					return nil, err
				}
				if inst.Status == StatusPausing || inst.Status == StatusResuming {
					return nil, httpx.BadGateway("The database engine failed; the database stays "+inst.Status+
						" and is retried in the background", h.svc.item(inst))
				}
				return httpx.OK("Database "+map[bool]string{true: "paused", false: "resumed"}[v.pause], h.svc.item(inst)), nil
			})
	}

	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "deleteMyDatabase", Method: http.MethodDelete,
		Path: "/api/me/databases/{id}", Tags: tags, Summary: "Delete a database",
		Description: "Drops the database and its role on the engine (on PostgreSQL the role's logins are refused first, and what other databases grant it or it owns there is revoked or given to their owners, so no other tenant can keep it from being dropped; on MySQL/MariaDB the user's account is locked first and the drop waits at most 5 s for a lock a session holds). 502 when the engine failed: the database stays Deleting and is retried in the background, or by deleting it again. " +
			"409 while another change of the database is in progress (try again), a DELETE still under way included: of DELETEs sent at once one answers 200, the others 409 (or 404 once it is deleted).",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}},
		func(ctx context.Context, in *idInput) (*httpx.Response[Item], error) {
			return h.deleted(ctx, in.ID, authn.FromContext(ctx).UserID)
		})

	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "revealMyDatabasePassword", Method: http.MethodGet,
		Path: "/api/me/databases/{id}/password", Tags: tags, Summary: "Reveal a database's password",
		Description: "Limited by `RateLimit:PasswordReveal` per user; every reveal is audited (`database.password.revealed`, with IP and user agent). " +
			"409 while the database is Provisioning, Failed or Deleting, and 409 with `Retry-After` while its owner password is being changed on the engine " +
			"(a password reset took the account over: the new password is stored but does not log in yet; the engine is retried in the background). " +
			"403 for a user with TOTP on whose session has not passed the second factor within `Auth:StepUpMinutes` (POST /api/me/mfa/step-up).",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusForbidden},
		Responses: map[string]*huma.Response{
			"409": {Description: "The database is Provisioning, Failed or Deleting (no `Retry-After`: it depends on the database, read it again), " +
				"or its owner password is being changed on the engine (with `Retry-After`).",
				Headers: map[string]*huma.Param{"Retry-After": {Description: "Only while the owner password is being changed on the engine: " +
					"seconds until the background finisher's next attempt; reveal again after it.", Schema: &huma.Schema{Type: "integer"}}}},
		}},
		func(ctx context.Context, in *idInput) (*httpx.Response[Reveal], error) {
			uid := authn.FromContext(ctx).UserID
			if err := authn.RequireStepUp(ctx); err != nil {
				return nil, err
			}
			if err := h.limiter.Check(ctx, "PasswordReveal", fmt.Sprint(uid)); err != nil {
				return nil, err
			}
			r, err := h.svc.Reveal(ctx, in.ID, uid)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", *r), nil
		})

	h.registerAdmin(api)
}

// created answers a create: 201 when Active, else 502 with the row as stored.
func (h *Handler) created(ctx context.Context, in CreateInput) (*httpx.Response[Item], error) {
	inst, err := h.svc.Create(ctx, in)
	if inst == nil {
		return nil, err
	}
	item := h.svc.item(inst)
	if inst.Status != StatusActive {
		return nil, httpx.BadGateway("The database engine failed; the database is "+inst.Status+
			" and will be retried in the background", item)
	}
	return httpx.Created("Database created", item), nil
}

func (h *Handler) deleted(ctx context.Context, id, userID int64) (*httpx.Response[Item], error) {
	inst, err := h.svc.Delete(ctx, id, userID)
	if inst == nil {
		return nil, err
	}
	item := h.svc.item(inst)
	if inst.Status != StatusDeleted {
		return nil, httpx.BadGateway("The database engine failed; the database stays Deleting and is retried in the background", item)
	}
	return httpx.OK("Database deleted", item), nil
}
