// Command provisioner runs the resource provisioning service.
//
//	provisioner [serve]              start the API (after applying migrations)
//	provisioner migrate up|down|status
//	provisioner version
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"go.uber.org/fx"

	"provisioner/app"
	"provisioner/platform/config"
	"provisioner/platform/db"
)

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		// A soft limit makes the runtime return the memory of argon2id bursts (19 MiB per hash)
		// to the system instead of keeping it; GOMEMLIMIT overrides it.
		debug.SetMemoryLimit(96 << 20)
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "serve":
		cfg, err := app.LoadConfig(config.Source{})
		if err != nil {
			return err
		}
		// A failed start (the port is taken, a dependency is down) comes back here and is printed
		// by main as one line naming the cause; fx's own Run would exit 1 in silence.
		return app.Serve(cfg)
	case "migrate":
		return migrate(args[1:])
	case "version":
		fmt.Println(app.Version)
		return nil
	default:
		return fmt.Errorf("unknown command %q (serve, migrate up|down|status, version)", cmd)
	}
}

func migrate(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: migrate up|down|status")
	}
	cfg, err := app.LoadConfig(config.Source{})
	if err != nil {
		return err
	}
	var m *db.Migrator
	a := fx.New(append(app.Options(cfg), fx.Populate(&m), fx.NopLogger)...)
	if err := a.Err(); err != nil {
		return app.StartupError(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	switch args[0] {
	case "up":
		names, err := m.Up(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("applied %d migrations %v\n", len(names), names)
	case "down":
		names, err := m.Down(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("rolled back %d migrations %v\n", len(names), names)
	case "status":
		applied, pending, err := m.Status(ctx)
		if err != nil {
			return err
		}
		for _, n := range applied {
			fmt.Println("applied ", n)
		}
		for _, n := range pending {
			fmt.Println("pending ", n)
		}
	default:
		return fmt.Errorf("usage: migrate up|down|status")
	}
	return nil
}
