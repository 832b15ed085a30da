// Command configdoc writes config/config.example.yaml and the table of configuration keys in docs/configuration.md
// from the configuration sections of the platform and of every module (go generate ./app runs
// it); app's tests fail while the committed files differ from what it writes.
//
//	configdoc [-root DIR]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"provisioner/app"
	"provisioner/platform/config"
)

func main() {
	root := flag.String("root", ".", "the repository's root directory")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	example, table, err := app.ConfigDocs()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "config", "config.example.yaml"), example, 0o644); err != nil {
		return err
	}
	readmePath := filepath.Join(root, "docs", "configuration.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	out, err := config.ReplaceTable(readme, table)
	if err != nil {
		return err
	}
	return os.WriteFile(readmePath, out, 0o644)
}
