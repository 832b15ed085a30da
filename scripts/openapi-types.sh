#!/usr/bin/env bash
# Checks that the TypeScript types openapi-typescript generates from the served OpenAPI document
# (npm openapi-typescript and typescript, pinned in test/openapi-types/package-lock.json) are, for
# a few operations, the golden ones in test/openapi-types/golden/: what the document shares under
# components must not change what a generated client sees. Offline once installed.
#   UPDATE=1 scripts/openapi-types.sh   rewrites the golden file from the current document, for a
#                                       change to those operations that is meant (review its diff).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
dir=test/openapi-types
if [[ ! -d $dir/node_modules/openapi-typescript || ! -d $dir/node_modules/typescript ]]; then
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
out=test-output/openapi.json
OPENAPI_OUT="$PWD/$out" go test -count=1 -run '^TestOpenAPIDocument$' ./app/ >/dev/null
if [[ ${UPDATE:-0} == 1 ]]; then
  node "$dir/types.mjs" golden "$out"
  say "rewrote $dir/golden/operations.d.ts"
else
  node "$dir/types.mjs" check "$out" test-output/openapi-types
fi
