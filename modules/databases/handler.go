package databases

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"provisioner/platform/authn"
	"provisioner/platform/httpx"
	"provisioner/platform/provision"
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
		_            struct{} `additionalProperties:"true"`
		Engine       string   `json:"engine,omitempty" enum:"postgres,mysql" doc:"Default: the configured default engine."`
		Name         string   `json:"name,omitempty" maxLength:"63" pattern:"^[A-Za-z0-9 _.-]*$" doc:"A display name; by default the generated database name."`
		RotationDays int      `json:"rotationDays,omitempty" minimum:"0" maximum:"3650" doc:"Days between automatic password rotations; 0 (default): off."`
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
		Path: "/api/me/databases", Tags: tags, Summary: "List my databases",
		Description: "A deleted database is listed as Deleted with purgeAt until its recovery window ends, then no more."},
		func(ctx context.Context, _ *struct{}) (*httpx.Response[[]Item], error) {
			items, err := h.svc.ListMine(ctx, authn.FromContext(ctx).UserID)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", items), nil
		})

	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "createMyDatabase", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
		Path: "/api/me/databases", Tags: tags, Summary: "Create a database", DefaultStatus: http.StatusCreated,
		Description: "201 with the Active database; 409 at `Databases:MaxPerUser`; 502 with the database as stored when the " +
			"engine failed.",
		Errors: []int{http.StatusConflict, http.StatusBadGateway}, Responses: engineFailed},
		func(ctx context.Context, in *createInput) (*httpx.Response[Item], error) {
			ci := CreateInput{UserID: authn.FromContext(ctx).UserID}
			if in.Body != nil {
				ci.Engine, ci.Name, ci.RotationDays = in.Body.Engine, in.Body.Name, in.Body.RotationDays
			}
			return h.created(ctx, ci)
		})

	for _, v := range []struct {
		verb  string
		pause bool
	}{{"pause", true}, {"resume", false}} {
		httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: v.verb + "MyDatabase", Metadata: httpx.Meta(httpx.PerUserLimit("Provision"), httpx.Idempotent()), Method: http.MethodPost,
			Path: "/api/me/databases/{id}/" + v.verb, Tags: tags, Summary: map[bool]string{true: "Pause a database", false: "Resume a database"}[v.pause],
			Description: map[bool]string{
				true: "Active → Paused: its roles can no longer connect. 502 when the engine failed (finished in the " +
					"background); 409 in another state or change.",
				false: "Paused → Active. 502 when the engine failed (finished in the background); 409 in another state or change.",
			}[v.pause],
			Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: engineFailed},
			func(ctx context.Context, in *idInput) (*httpx.Response[Item], error) {
				inst, o, err := h.svc.SetPaused(ctx, in.ID, authn.FromContext(ctx).UserID, v.pause)
				return h.answer(inst, o, err, false, "Database "+map[bool]string{true: "paused", false: "resumed"}[v.pause])
			})
	}

	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "deleteMyDatabase", Metadata: httpx.PerUserLimit("Provision"), Method: http.MethodDelete,
		Path: "/api/me/databases/{id}", Tags: tags, Summary: "Delete a database",
		Description: "Deleted at once: logins refused, sessions ended; dropped at purgeAt (`Databases:RecoveryHours`), " +
			"restorable until then. 502 when the engine failed (retried in the background); 409 during another change or if " +
			"already deleted.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusBadGateway}, Responses: engineFailed},
		func(ctx context.Context, in *idInput) (*httpx.Response[Item], error) {
			return h.deleted(ctx, in.ID, authn.FromContext(ctx).UserID, false)
		})

	httpx.Register(api, httpx.Authenticated, huma.Operation{OperationID: "revealMyDatabasePassword", Method: http.MethodGet,
		Path: "/api/me/databases/{id}/password", Tags: tags, Summary: "Reveal a database's password",
		Description: "Limited by `RateLimit:PasswordReveal` and audited. 409 unless Active or Paused, or while its password " +
			"changes; 403 without a recent second factor.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusForbidden},
		Responses: map[string]*huma.Response{
			"409": {Description: "Provisioning, Failed or Deleting; or, with `Retry-After`, its password is being changed on the engine.",
				Headers: map[string]*huma.Param{"Retry-After": {Description: "Only while the owner password is being changed on the engine: " +
					"seconds until the background finisher's next attempt; reveal again after it.", Schema: &huma.Schema{Type: "integer"}}}},
		}},
		func(ctx context.Context, in *idInput) (*httpx.Response[Reveal], error) {
			uid := authn.FromContext(ctx).UserID
			if err := authn.GuardSecret(ctx, h.limiter); err != nil {
				return nil, err
			}
			r, err := h.svc.Reveal(ctx, in.ID, uid)
			if err != nil {
				return nil, err
			}
			return httpx.OK("OK", *r), nil
		})

	h.registerRecovery(api)
	h.registerRotation(api)
	h.registerAdmin(api)
}

// engineFailed documents the 502 of the operations that drive an engine.
var engineFailed = httpx.ProviderFailed("The database engine failed; `data` as stored (the database or the credential).")

// engineFailedNoData documents the 502 of the operations whose success answer holds a password:
// `data` is null.
var engineFailedNoData = httpx.ProviderFailed("The database engine failed; `data` is null.")

// answer is the answer of a route that drove inst (httpx.Driven): done (201 for a create), or 502
// with the database as it stands (Retry-After while the finisher retries it).
func (h *Handler) answer(inst *Instance, o provision.Outcome, err error, created bool, done string) (*httpx.Response[Item], error) {
	a := httpx.Answers{Created: created, Done: done}
	if inst != nil {
		a.Failed = "The database engine failed; the database stays " + inst.Status + " and is retried in the background"
		if created {
			a.Failed = "The database engine failed; the database is " + inst.Status + " and will be retried in the background"
		}
	}
	return httpx.Driven(inst, o, err, h.svc.item, a)
}

// created answers a create: 201 when Active, else 502 with the row as stored.
func (h *Handler) created(ctx context.Context, in CreateInput) (*httpx.Response[Item], error) {
	inst, o, err := h.svc.Create(ctx, in)
	return h.answer(inst, o, err, true, "Database created")
}

func (h *Handler) deleted(ctx context.Context, id, userID int64, purge bool) (*httpx.Response[Item], error) {
	inst, o, err := h.svc.Delete(ctx, id, userID, purge)
	done := "Database deleted"
	if inst != nil && inst.Status == StatusRecoverable {
		done = "Database deleted; it can be restored until purgeAt"
	}
	return h.answer(inst, o, err, false, done)
}
