#!/usr/bin/env bash
# Crash consistency: the real binary, SIGKILLed at random moments while clients create and delete
# databases, DNS records and wfauto accounts; then checks that the local trace and the external
# systems agree (test/chaos, build tag "chaos"). Three runs: one instance; two instances behind a
# round-robin client; one instance with the fake DNS provider and wfauto cell failing 30% of calls
# (500, 429 with Retry-After, timeouts). Set REPLICAS/FAULTS/KILLS/OPS to run one variant.
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
run() {
  echo "== chaos: $*"
  env "$@" go test -tags chaos -count=1 -timeout 10m -v -run TestChaos ./test/chaos/ 2>&1 | grep -v '^{"time"'
  return "${PIPESTATUS[0]}"
}
if [[ -n ${REPLICAS:-}${FAULTS:-} ]]; then
  run REPLICAS="${REPLICAS:-1}" FAULTS="${FAULTS:-0}"
else
  run REPLICAS=1 FAULTS=0
  run REPLICAS=2 FAULTS=0
  run REPLICAS=1 FAULTS=0.3
fi
