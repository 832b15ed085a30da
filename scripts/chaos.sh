#!/usr/bin/env bash
# Crash consistency: the real binary, SIGKILLed at random moments while clients create and delete
# databases, DNS records and wfauto accounts; then checks that the local trace and the external
# systems agree (test/chaos, build tag "chaos").
#   scripts/chaos.sh                     one instance, 12 kills, 200 operations
#   REPLICAS=2 scripts/chaos.sh          two instances behind a round-robin client
#   FAULTS=0.3 scripts/chaos.sh          the fake DNS provider and wfauto cell fail 30% of calls
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
# shellcheck source=scripts/tenant-pg.sh
source scripts/tenant-pg.sh
export PATH="$PATH:/usr/local/go/bin"
ensure_postgres
ensure_redis
start_tenant_pg
export TEST_DATABASE_URL=${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
export TEST_REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:6379/0}
go test -tags chaos -count=1 -timeout 15m -v -run TestChaos ./test/chaos/ 2>&1 | grep -v '^{"time"'
