#!/usr/bin/env bash
# Runs every test against the real services: PostgreSQL (a fresh control database per test
# package), Redis, MariaDB, RabbitMQ (with its management API), and a scram-sha-256 PostgreSQL
# cluster for tenant databases.
#   scripts/test.sh                      everything
#   scripts/test.sh -run TestX ./modules/dns/...   arguments go to `go test` instead of ./...
# FAST=1, or any argument, skips the fuzz, OpenAPI lint and types, TypeScript client, vulncheck,
# chaos and browser stages.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
# shellcheck source=scripts/tenant-pg.sh
source scripts/tenant-pg.sh
export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"

ensure_postgres
ensure_redis
ensure_mariadb
ensure_rabbitmq
start_tenant_pg

export TEST_DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
export TEST_REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}
export TEST_TENANT_MYSQL_DSN=${TEST_TENANT_MYSQL_DSN:-root@tcp(127.0.0.1:3306)/}
export TEST_RABBITMQ_MANAGEMENT_URL=${TEST_RABBITMQ_MANAGEMENT_URL:-http://guest:guest@127.0.0.1:15672}

unformatted=$(gofmt -l $(git ls-files -co --exclude-standard -- '*.go'))
if [[ -n $unformatted ]]; then
  say "gofmt would change:"; say "$unformatted"; exit 1
fi
go vet ./...

if [[ $# -gt 0 ]]; then
  go test -race -count=1 -p 2 -timeout 20m "$@"
else
  # Under the race detector, sockets are read and written through net.Conn (httpx.RawSocket is
  # off: its raw system calls would hide from the detector that bytes written happen before they
  # are read). The production path is tested too, without it, alongside the race run (both mostly
  # wait): the server's sockets and the AI gateway's upstream connections.
  rawlog=$(mktemp /tmp/rawsocket-tests.XXXXXX)
  go test -count=1 -p 1 -timeout 5m ./platform/httpx/ ./modules/aikeys/ >"$rawlog" 2>&1 & raw=$!
  say "== go test -race ./..."
  stage_start=$SECONDS
  # Four packages at a time on two cores: the tests spend much of their time waiting (on the
  # engines, the finisher's polls, the meter's flushes), and each package has its own control
  # database, so four at a time take about half as long as two. The databases package, the
  # longest (4 to 6.5 minutes alone, by the hour), is named first so it starts first. The timeout
  # only catches a hung package: sharing two cores with three others, that one takes up to twice
  # as long as alone.
  race=0; go test -race -count=1 -p 4 -timeout 20m ./modules/databases/ ./... || race=$?
  say "   go test -race took $((SECONDS - stage_start)) s"
  say "== without the race detector: raw socket I/O (server, AI gateway)"
  rc=0; wait "$raw" || rc=$? # (never left running behind a failed race run)
  cat "$rawlog"; rm -f "$rawlog"
  [[ $race == 0 ]] || exit "$race"
  [[ $rc == 0 ]] || exit "$rc"
fi

if [[ ${FAST:-0} != 1 && $# -eq 0 ]]; then
  for stage in fuzz openapi-lint openapi-types ts-client vulncheck chaos browser-test; do
    if [[ -x scripts/$stage.sh ]]; then
      if [[ $stage == openapi-* || $stage == ts-client ]] && ! command -v npm >/dev/null 2>&1; then
        say "npm not found: skipping $stage"; continue
      fi
      say "== $stage"
      stage_start=$SECONDS
      "scripts/$stage.sh"
      say "   $stage took $((SECONDS - stage_start)) s"
    fi
  done
fi
say "all tests passed"
