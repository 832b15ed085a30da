#!/usr/bin/env bash
# govulncheck ./... against the Go vulnerability database: fails (exit 3) when a known
# vulnerability is reachable from our code, in a dependency or in the standard library.
#   scripts/vulncheck.sh                      vuln.go.dev
#   VULNDB=https://mirror.example scripts/vulncheck.sh   or VULNDB=file:///path/to/db (a mirror)
# Before scanning it checks itself: against a one-entry database that marks a function we call as
# vulnerable, govulncheck must fail and name the entry (so a scan that finds nothing means
# something). A machine that cannot reach vuln.go.dev (this project's CI has no internet) scans
# against the golang.org/x/vulndb module fetched through the Go module proxy instead (see below);
# one that can reach neither gets the self-check and a SKIPPED line, not a pass; REQUIRE_VULNDB=1
# makes that an error instead.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
GOVULNCHECK=golang.org/x/vuln/cmd/govulncheck@v1.9.0
db=${VULNDB:-https://vuln.go.dev}

work=$(mktemp -d /tmp/vulncheck.XXXXXX)
trap 'rm -rf "$work"' EXIT
GOBIN="$work" go install "$GOVULNCHECK"
bin="$work/govulncheck"

# The self-check's database: one synthetic entry for the module and function the AI gateway calls
# on every request (fasthttp's Client.DoTimeout), fixed in a version that does not exist yet.
fasthttp=$(go list -m -f '{{.Version}}' github.com/valyala/fasthttp)
mkdir -p "$work/db/index" "$work/db/ID"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "{\"modified\":\"$now\"}" >"$work/db/index/db.json"
echo "[{\"path\":\"github.com/valyala/fasthttp\",\"vulns\":[{\"id\":\"GO-9999-0001\",\"modified\":\"$now\",\"fixed\":\"99.0.0\"}]}]" \
  >"$work/db/index/modules.json"
cat >"$work/db/ID/GO-9999-0001.json" <<EOF
{"schema_version":"1.3.1","id":"GO-9999-0001","modified":"$now","published":"$now",
 "summary":"Synthetic entry: scripts/vulncheck.sh's self-check (not a real vulnerability)",
 "details":"Marks fasthttp $fasthttp's Client.DoTimeout as vulnerable so that the scan must report it.",
 "affected":[{"package":{"name":"github.com/valyala/fasthttp","ecosystem":"Go"},
   "ranges":[{"type":"SEMVER","events":[{"introduced":"0"},{"fixed":"99.0.0"}]}],
   "ecosystem_specific":{"imports":[{"path":"github.com/valyala/fasthttp","symbols":["Client.DoTimeout"]}]}}],
 "database_specific":{"url":"https://example.invalid/GO-9999-0001"}}
EOF
set +e
"$bin" -db "file://$work/db" ./... >"$work/self.txt" 2>&1
rc=$?
set -e
if [[ $rc != 3 ]] || ! grep -q "GO-9999-0001" "$work/self.txt"; then
  say "vulncheck: the self-check failed: govulncheck exited $rc and did not report the synthetic entry."
  say "  The entry marks fasthttp's Client.DoTimeout, which the AI gateway calls; if our code no longer"
  say "  calls it, change the entry (module, version and symbol) to a function it does call."
  cat "$work/self.txt" >&2
  exit 1
fi
sed -n '/^Vulnerability #1/,/^$/p' "$work/self.txt" | head -12 >&2
say "vulncheck: self-check passed (a reachable vulnerable call is reported and fails the scan)"

# The database: vuln.go.dev, or a mirror given in VULNDB. Where vuln.go.dev cannot be reached (this
# project's CI has no internet, but the Go module proxy answers), the same entries are built from the
# golang.org/x/vulndb module, the repository vuln.go.dev is published from (its data/osv holds every
# entry in OSV form), at the newest version the module proxy lists: indexed here in the layout
# govulncheck reads (index/db.json, index/modules.json, ID/<id>.json).
if [[ $db == https://vuln.go.dev && -z ${VULNDB:-} ]] && ! curl -sf --max-time 10 -o /dev/null "$db/index/db.json.gz"; then
  proxy=$(go env GOPROXY | tr ',|' '\n\n' | grep -m1 '^http' || true)
  version=""
  if [[ -n $proxy ]]; then
    version=$(curl -sf --max-time 20 "$proxy/golang.org/x/vulndb/@v/list" | sort -V | tail -1 || true)
  fi
  if [[ -n $version ]] && dir=$(cd "$work" && go mod download -json "golang.org/x/vulndb@$version" 2>/dev/null | jq -er .Dir); then
    mkdir -p "$work/x/index" "$work/x/ID"
    cp "$dir"/data/osv/*.json "$work/x/ID/"
    jq -c -s '[.[] as $e | $e.affected[]? | {path: .package.name, id: $e.id, modified: $e.modified,
        fixed: ([.ranges[]?.events[]? | .fixed // empty] | last)}]
      | group_by(.path) | map({path: .[0].path, vulns: (map({id, modified} + (if .fixed then {fixed} else {} end)) | unique)})' \
      "$work"/x/ID/*.json >"$work/x/index/modules.json"
    echo "{\"modified\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\"}" >"$work/x/index/db.json"
    latest=$(find "$work/x/ID" -name 'GO-*.json' -printf '%f\n' | sed 's/\.json$//' | sort -t- -k2,2n -k3,3n | tail -1)
    say "vulncheck: $db cannot be reached; using golang.org/x/vulndb@$version from the module proxy ($(find "$work/x/ID" -name '*.json' | wc -l) entries, newest $latest)"
    db="file://$work/x"
  fi
fi
if [[ $db == http* ]] && ! curl -sf --max-time 10 -o /dev/null "$db/index/db.json.gz"; then
  say "vulncheck: SKIPPED: $db cannot be reached from this machine, nor golang.org/x/vulndb through the module proxy. Run scripts/vulncheck.sh where it can, or point VULNDB at a mirror."
  [[ ${REQUIRE_VULNDB:-0} == 1 ]] && exit 1
  exit 0
fi
"$bin" -db "$db" ./...
