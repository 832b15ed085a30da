#!/usr/bin/env bash
# Lints the OpenAPI document the service serves with Spectral (npm @stoplight/spectral-cli,
# ruleset spectral:oas). Errors fail; warnings are printed.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
tools=.cache/npm-tools
if [[ ! -x $tools/node_modules/.bin/spectral ]]; then
  mkdir -p "$tools"
  (cd "$tools" && { [[ -f package.json ]] || npm init -y >/dev/null; } &&
    npm install --no-audit --no-fund --loglevel=error @stoplight/spectral-cli@6.16.3 >/dev/null)
fi
out=test-output/openapi.json
OPENAPI_OUT="$PWD/$out" go test -count=1 -run '^TestOpenAPIDocument$' ./app/ >/dev/null
"$tools/node_modules/.bin/spectral" lint --ruleset .spectral.yaml --fail-severity=error "$out"
