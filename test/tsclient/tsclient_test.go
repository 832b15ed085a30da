//go:build tsclient

// Package tsclient checks the TypeScript client under clients/typescript against a live service:
// its committed types are what openapi-typescript generates from the served document, and its
// Node test (register, sign in, create and list a database, a 400's fields, a 429's Retry-After)
// passes through the typed client. Run by scripts/ts-client.sh.
package tsclient

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"provisioner/app/apptest"
	"provisioner/platform/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const client = "../../clients/typescript"

func TestTypeScriptClient(t *testing.T) {
	if _, err := os.Stat(filepath.Join(client, "node_modules", "openapi-fetch")); err != nil {
		t.Fatal("run scripts/ts-client.sh (it installs the client's packages from npm)")
	}
	kv := map[string]any{"RateLimit:ForgotPasswordPerIp": "3-H", "RateLimit:Register": "1000-M", "RateLimit:Login": "1000-M"}
	engine := "postgres"
	if pg := os.Getenv("TEST_TENANT_PG_URL"); pg != "" {
		kv["ConnectionStrings:TenantPostgres"] = pg
	} else {
		kv["ConnectionStrings:TenantMysql"] = testutil.TenantMysqlDSN()
		engine = "mysql"
	}
	a := apptest.Start(t, apptest.With(kv))

	t.Run("types match the served document", func(t *testing.T) {
		doc := a.Get("/api/openapi.json", "")
		require.Equal(t, 200, doc.Status)
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "openapi.json"), doc.Raw, 0o600))
		generated := filepath.Join(dir, "schema.d.ts")
		run(t, nil, "npx", "--no-install", "openapi-typescript", filepath.Join(dir, "openapi.json"), "-o", generated)
		want, err := os.ReadFile(generated)
		require.NoError(t, err)
		committed := filepath.Join(client, "src", "schema.d.ts")
		if os.Getenv("UPDATE") == "1" {
			require.NoError(t, os.WriteFile(committed, want, 0o644))
		}
		got, err := os.ReadFile(committed)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want, got),
			"clients/typescript/src/schema.d.ts differs from what the served document generates: UPDATE=1 scripts/ts-client.sh")
	})

	t.Run("npm test against the service", func(t *testing.T) {
		run(t, []string{"PROVISIONER_URL=" + a.URL, "PROVISIONER_ENGINE=" + engine}, "npm", "test", "--silent")
	})
}

func run(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = client
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %v:\n%s", name, args, out)
}
