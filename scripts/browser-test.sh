#!/usr/bin/env bash
# Browser tests in a real headless Chromium (Debian's chromium, driven by playwright-core from npm):
# the API reference page and the OAuth round trip. Screenshots land in test-output/browser/.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
export PATH="$PATH:/usr/local/go/bin"
if [[ ! -x /usr/bin/chromium ]]; then
  echo "Chromium is missing: apt-get install -y chromium" >&2
  exit 1
fi
if [[ ! -d test/browser/node_modules/playwright-core ]]; then
  (cd test/browser && npm ci --no-audit --no-fund --loglevel=error)
fi
go test -tags browser -count=1 -timeout 5m ./test/browser/ 2>&1 | grep -v '^{"time"'
