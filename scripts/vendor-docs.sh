#!/usr/bin/env bash
# Refreshes the Swagger UI files embedded in the binary (platform/docs/assets) from the npm registry.
#   scripts/vendor-docs.sh [version]
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-5.35.0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack "swagger-ui-dist@$version" >/dev/null && tar xzf ./*.tgz)
cp "$tmp/package/swagger-ui-bundle.js" "$tmp/package/swagger-ui.css" "$tmp/package/LICENSE" platform/docs/assets/
echo "swagger-ui-dist $version vendored into platform/docs/assets; update the version in platform/docs/docs.go"
