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

	"provisioner/platform/audit"
	"provisioner/platform/config"
	"provisioner/platform/module"
)

// Options is the whole application for cfg. Extra options (tests) are appended.
func Options(cfg *config.Config, extra ...fx.Option) []fx.Option {
	opts := []fx.Option{
		fx.Supply(cfg),
		fx.WithLogger(func() fxevent.Logger { return fxevent.NopLogger }),
		Platform,
	}
	for _, m := range Modules {
		opts = append(opts, m.Fx(cfg))
	}
	// What the platform takes from every module's descriptor: its audit namespaces, its tags.
	opts = append(opts, fx.Supply(audit.NewSystemNamespaces(module.AuditNamespaces(Modules)...)))
	if tags, err := module.Tags(platformTags, Modules); err != nil {
		opts = append(opts, fx.Error(err))
	} else {
		opts = append(opts, fx.Supply(tagDescriptions(tags)))
	}
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

// LoadConfig loads and validates the configuration of the platform and of every module (its
// section), from src: one clear line naming the first bad key, before anything starts.
func LoadConfig(src config.Source) (*config.Config, error) {
	return config.Load(src, module.Sections(Modules)...)
}

// ConfigDocs are config/config.example.yaml and the table of configuration keys in docs/configuration.md, generated
// from the sections of the platform and of every module (go generate ./app writes them).
func ConfigDocs() (example []byte, table string, err error) {
	sections := module.Sections(Modules)
	if example, err = config.Example(sections...); err != nil {
		return nil, "", err
	}
	table, err = config.Table(sections...)
	return example, table, err
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
