// Package app assembles the service: the platform's providers and one fx module per resource.
package app

import (
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
	return append(opts, extra...)
}
