package app_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"provisioner/app/apptest"
	"provisioner/platform/httpx"
)

// slowRoutes is a module's route whose request hands work to the module's worker, as a
// forgot-password request hands its mail to auth's background sender.
type slowRoutes struct {
	started chan struct{}
	handed  atomic.Int64
}

func (s *slowRoutes) Register(api *httpx.API) {
	httpx.Register(api, httpx.Public, huma.Operation{OperationID: "slowProbe", Method: http.MethodPost, Path: "/api/test/slow",
		Summary: "A request still running at shutdown"},
		func(ctx context.Context, _ *struct{}) (*httpx.Response[struct{}], error) {
			close(s.started)
			time.Sleep(300 * time.Millisecond)
			s.handed.Add(1)
			return httpx.OK("OK", struct{}{}), nil
		})
}

// TestModulesStopAfterTheServerHasDrained: a module's stop hook registered by an fx.Invoke ran
// before the server's (the server's hook was appended by the platform, the first module, and fx
// stops in reverse order), so it stopped, flushed or waited for its background work while the
// server was still answering requests that would hand it more: auth's wait for reset mails and the
// databases module's usage refresher stopped with requests in flight (the AI meter lost usage so
// until it moved its hook). The server now starts after every module and stops before them: a
// module's stop hook sees the work of every request the server answered.
func TestModulesStopAfterTheServerHasDrained(t *testing.T) {
	routes := &slowRoutes{started: make(chan struct{})}
	var seenAtStop atomic.Int64
	seenAtStop.Store(-1)
	probe := fx.Module("probe",
		fx.Provide(httpx.AsRoutes(func() *slowRoutes { return routes })),
		fx.Invoke(func(lc fx.Lifecycle) {
			lc.Append(fx.StopHook(func() { seenAtStop.Store(routes.handed.Load()) }))
		}),
	)
	a := apptest.Start(t, apptest.WithFx(probe))
	answered := make(chan int, 1)
	go func() { answered <- a.Post("/api/test/slow", "", map[string]any{}).Status }()
	<-routes.started
	a.Stop()
	require.Equal(t, http.StatusOK, <-answered, "the request in flight is answered")
	assert.Equal(t, int64(1), seenAtStop.Load(), "the module stopped after the server had answered the request in flight")
}
