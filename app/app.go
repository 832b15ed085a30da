// Package app assembles the service: the platform's providers and one fx module per resource.
package app

import (
	"runtime/debug"

	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"provisioner/platform/config"
)

// Options is the whole application for cfg. Extra options (tests) are appended.
func Options(cfg *config.Config, extra ...fx.Option) []fx.Option {
	opts := []fx.Option{
		fx.Supply(cfg),
		fx.WithLogger(func() fxevent.Logger { return fxevent.NopLogger }),
		Platform,
	}
	opts = append(opts, Modules...)
	// Startup (migrations, schema generation) allocates more than serving does: hand that memory
	// back once everything has started.
	opts = append(opts, fx.Invoke(func(lc fx.Lifecycle) { lc.Append(fx.StartHook(debug.FreeOSMemory)) }))
	return append(opts, extra...)
}
