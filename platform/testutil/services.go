// Package testutil runs tests against the real services that scripts/test.sh makes sure are up:
// PostgreSQL (a fresh control database per test package), Redis, MariaDB and the
// password-authenticated tenant PostgreSQL cluster. A missing service fails the test; it is never
// skipped silently.
package testutil

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// Env returns the environment variable name or def.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// AdminURL is the machine PostgreSQL's admin URL, used to create control databases.
func AdminURL() string {
	return Env("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
}

// RedisURL is the test Redis.
func RedisURL() string { return Env("TEST_REDIS_URL", "redis://127.0.0.1:6379/0") }

// TenantMysqlDSN is the admin DSN of the MariaDB used for tenant databases.
func TenantMysqlDSN() string { return Env("TEST_TENANT_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/") }

// TenantPostgresURL is the admin URL of the scram-sha-256 tenant cluster scripts/test.sh starts.
func TenantPostgresURL(t testing.TB) string {
	t.Helper()
	v := os.Getenv("TEST_TENANT_PG_URL")
	if v == "" {
		t.Fatal("TEST_TENANT_PG_URL is not set: run the tests through scripts/test.sh, which starts a " +
			"password-authenticated PostgreSQL cluster for tenant databases")
	}
	return v
}

// RandomSuffix is 8 random hex characters.
func RandomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// CreateDatabase creates an empty database on the machine PostgreSQL named after the test
// package and returns its URL and a function dropping it.
func CreateDatabase(label string) (string, func(), error) {
	label = nonIdent.ReplaceAllString(strings.ToLower(label), "_")
	if len(label) > 30 {
		label = label[len(label)-30:]
	}
	name := fmt.Sprintf("t_%s_%s", strings.Trim(label, "_"), RandomSuffix())
	admin, err := sql.Open("pgx", AdminURL())
	if err != nil {
		return "", nil, fmt.Errorf("admin database URL: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create test database (is PostgreSQL up? run scripts/test.sh): %w", err)
	}
	u, _ := url.Parse(AdminURL())
	u.Path = "/" + name
	drop := func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
	}
	return u.String(), drop, nil
}

// FreshDatabase creates an empty database on the machine PostgreSQL (see CreateDatabase), dropped
// when the test ends: the control database of a second deployment, its rows numbered from 1.
func FreshDatabase(t testing.TB, label string) string {
	t.Helper()
	url, drop, err := CreateDatabase(label)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	return url
}

var packageDB string

// Main runs a test package with one fresh control database, dropped afterwards. Use it from
// TestMain: func TestMain(m *testing.M) { testutil.Main(m) }.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main returning the exit code instead of exiting, for a TestMain with its own cleanup.
func Run(m *testing.M) int {
	wd, _ := os.Getwd()
	url, drop, err := CreateDatabase(filepath.Base(wd))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	packageDB = url
	code := m.Run()
	drop()
	return code
}

// PackageDatabase is the package's control database URL (see Main).
func PackageDatabase(t testing.TB) string {
	t.Helper()
	if packageDB == "" {
		t.Fatal("testutil.Main was not called from TestMain")
	}
	return packageDB
}
