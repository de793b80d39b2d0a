#!/usr/bin/env bash
# The race detector and the fuzzers, bounded (CI runs this after
# scripts/test.sh):
#   - `go test -race -short` over the packages that start goroutines
#     (data loading, training, the distributed launcher, the CPU device's
#     workers, the notebook UI); -short leaves out the multi-second
#     training runs, which the plain test run already covers;
#   - every fuzz target for DRUTO_FUZZTIME (default 20s) each.
# A fuzzer's new crasher is written under the package's testdata/fuzz/ by
# `go test -fuzz`: commit it to the seed corpus (and fix the bug), so that
# every later plain `go test` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
RACE_PKGS=(./pkg/data ./pkg/train ./pkg/dist ./pkg/device/cpu ./nbui)
FUZZTIME="${DRUTO_FUZZTIME:-20s}"

start=$SECONDS
go test -race -short -count=1 -timeout "${RACE_TIMEOUT:-20m}" "${RACE_PKGS[@]}"
echo "race: ${RACE_PKGS[*]} in $((SECONDS - start)) s"

# Every Fuzz function of every package (go test -fuzz takes one target at
# a time, anchored so that FuzzX does not also match FuzzXY).
start=$SECONDS
n=0
while IFS= read -r file; do
  dir="./$(dirname "$file")"
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "$dir"
    n=$((n + 1))
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | sort)
[ "$n" -gt 0 ] || { echo "no fuzz target found" >&2; exit 1; }
echo "fuzz: $n targets, $FUZZTIME each, in $((SECONDS - start)) s"
