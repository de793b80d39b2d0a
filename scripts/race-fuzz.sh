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

# fuzz_one DIR TARGET runs one fuzz target. Go's fuzz engine can fail with
# "context deadline exceeded" when a worker misses its deadline on a loaded
# machine, with no input at fault (none written under testdata/fuzz/): such
# a run is tried once more. Any other failure, or a crasher, fails at once.
fuzz_one() {
  local log rc=0
  log=$(mktemp)
  go test -run '^$' -fuzz "^${2}\$" -fuzztime "$FUZZTIME" "$1" 2>&1 | tee "$log" || rc=$?
  if [ "$rc" -ne 0 ] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
    echo "fuzz: $2 failed on the fuzz engine's deadline with no input at fault; once more" >&2
    rc=0
    go test -run '^$' -fuzz "^${2}\$" -fuzztime "$FUZZTIME" "$1" || rc=$?
  fi
  rm -f "$log"
  return "$rc"
}

# Every Fuzz function of every package (go test -fuzz takes one target at
# a time, anchored so that FuzzX does not also match FuzzXY).
start=$SECONDS
n=0
while IFS= read -r file; do
  dir="./$(dirname "$file")"
  for target in $(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$file"); do
    fuzz_one "$dir" "$target"
    n=$((n + 1))
  done
done < <(git ls-files '*_test.go' | xargs grep -l '^func Fuzz' | sort)
[ "$n" -gt 0 ] || { echo "no fuzz target found" >&2; exit 1; }
echo "fuzz: $n targets, $FUZZTIME each, in $((SECONDS - start)) s"
