// Package migrations holds the platform-wide SQL migrations: users (read by every module's
// guard) and the append-only audit log. Module tables live in each module's own migrations.
package migrations

import "embed"

// FS holds the platform's migration files.
//
//go:embed *.sql
var FS embed.FS
