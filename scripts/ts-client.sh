#!/usr/bin/env bash
# The TypeScript client (clients/typescript): its types must be what openapi-typescript generates
# from the served document, and its Node test runs against a live service (test/tsclient).
#   UPDATE=1 scripts/ts-client.sh   rewrites clients/typescript/src/schema.d.ts from the document
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
export PATH="$PATH:/usr/local/go/bin"
dir=clients/typescript
if [[ ! -d $dir/node_modules/openapi-fetch || ! -d $dir/node_modules/typescript ]]; then
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
go test -tags tsclient -count=1 -timeout 5m ./test/tsclient/ 2>&1 | grep -v '^{"time"'
