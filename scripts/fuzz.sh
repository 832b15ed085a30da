#!/usr/bin/env bash
# Runs every Go fuzz target briefly (FUZZTIME each, default 5s). The checked-in corpus lives in
# each package's testdata/fuzz/<Target>/; plain `go test` replays it on every run.
#
# A finding always writes its input ("Failing input written to testdata/fuzz/…") and fails this
# script. A bare "context deadline exceeded" at the end of the fuzz time, with nothing written, is
# Go 1.26's fuzz-coordinator race (golang/go#75804, fixed in Go 1.27) on a busy machine, not a
# finding: it is reported and the target is run once more.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
fuzztime=${FUZZTIME:-5s}
log=$(mktemp /tmp/fuzz.XXXXXX)
trap 'rm -f "$log"' EXIT
fuzz() { # fuzz <pkg> <target>; 0 pass, 1 finding or other failure, 2 the coordinator's deadline race
  if go test -run '^$' -fuzz "^$2\$" -fuzztime "$fuzztime" "$1" >"$log" 2>&1; then return 0; fi
  if grep -q 'context deadline exceeded' "$log" && ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' "$log"; then
    return 2
  fi
  return 1
}
grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . | sort | while read -r file; do
  pkg=./$(dirname "${file#./}")
  grep -oE '^func Fuzz[A-Za-z0-9_]+' "$file" | sed 's/^func //' | while read -r target; do
    echo "fuzz $pkg $target ($fuzztime)"
    for attempt in 1 2; do
      rc=0; fuzz "$pkg" "$target" || rc=$?
      case $rc in
        0) break ;;
        2) echo "  the fuzz coordinator's deadline race (golang/go#75804), no finding; attempt $attempt"
           [[ $attempt == 2 ]] && { cat "$log"; exit 1; } ;;
        *) cat "$log"; exit 1 ;;
      esac
    done
  done
done
