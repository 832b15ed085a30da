// Package app assembles the service: the platform's providers and one fx module per resource.
package app

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"go.uber.org/dig"
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
	// The server's hooks come after every module's (this invoke runs after the modules' own), so it
	// starts listening once everything else has started, and at shutdown it stops first: it
	// finishes the requests in flight while what they hand work to (background mails, the AI
	// usage meter, the finisher, the bus) still runs, and only then do those stop and flush.
	opts = append(opts, fx.Invoke(startServer))
	// Startup (migrations, schema generation) allocates more than serving does: hand that memory
	// back once everything has started.
	opts = append(opts, fx.Invoke(func(lc fx.Lifecycle) { lc.Append(fx.StartHook(debug.FreeOSMemory)) }))
	return append(opts, extra...)
}

// Serve runs the service for cfg until SIGINT or SIGTERM. Unlike fx's App.Run, which with the
// silent fx logger exits with status 1 and says nothing when a start hook fails (the port is
// taken, a dependency is down), it returns that error, naming what failed, so the caller can
// print it; a failed start has undone the hooks that had run.
func Serve(cfg *config.Config, extra ...fx.Option) error {
	a := fx.New(Options(cfg, extra...)...)
	if err := a.Err(); err != nil {
		return StartupError(err)
	}
	startCtx, cancel := context.WithTimeout(context.Background(), a.StartTimeout())
	defer cancel()
	if err := a.Start(startCtx); err != nil {
		return fmt.Errorf("start the service: %w", err)
	}
	sig := <-a.Wait()
	stopCtx, cancel := context.WithTimeout(context.Background(), a.StopTimeout())
	defer cancel()
	if err := a.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop the service (%s): %w", sig.Signal, err)
	}
	if sig.ExitCode != 0 {
		return fmt.Errorf("stopped with exit code %d", sig.ExitCode)
	}
	return nil
}

// StartupError is err, the failure to build the application, as the one line to print: a setting
// a provider refused (a rate, the Redis URL) is its *config.ValidationError alone ("configuration
// Redis:Url: …"), like the settings Load checks, and any other failure is the error the failing
// constructor returned ("connect to control database …: connection refused"), without fx's chain of
// constructors in front of it (dig.RootCause).
func StartupError(err error) error {
	var ve *config.ValidationError
	if errors.As(err, &ve) {
		return ve
	}
	return dig.RootCause(err)
}
