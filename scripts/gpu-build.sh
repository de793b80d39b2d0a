#!/usr/bin/env bash
# gpu-build.sh: build, on the development machine, everything the GPU
# machine runs (it has no Go toolchain; see shared/GPU.md): one test binary
# per package with tests, build/gpu/<path-with-dashes>.test without the
# leading pkg/ (pkg/device/cpu: device-cpu.test; the root
# package is druto.test), and the CLI, build/gpu/druto. The git revision
# is stamped into the CLI and the test binaries (druto.Revision) and
# written to build/gpu/REVISION.
#
#   scripts/gpu-build.sh                  every package of the module
#   scripts/gpu-build.sh ./pkg/cuda .     only these packages (and the CLI)
#
# Then, on the GPU machine: DRUTO_REQUIRE_GPU=1 build/gpu/cuda.test -test.v
# (DRUTO_REQUIRE_GPU=1 turns "no GPU" skips into failures).
# A package that fails to build is reported and the others are still built;
# the exit status is 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=build/gpu
mkdir -p "$out"
rev=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain 2>/dev/null)" ]; then rev="$rev-dirty"; fi
echo "$rev" > "$out/REVISION"
# -s -w: no symbol tables, so that every binary fits the 64 MiB the device
# tool carries.
ldflags="-s -w -X github.com/druto/druto.Revision=$rev"
module=$(go list -m)
if [ $# -gt 0 ]; then pkgs=$(go list "$@"); else pkgs=$(go list ./...); fi
failed=()
for p in $pkgs; do
  ntests=$(go list -f '{{len .TestGoFiles}}{{len .XTestGoFiles}}' "$p" 2>/dev/null || echo err)
  [ "$ntests" = "00" ] && continue
  rel=${p#"$module"}
  rel=${rel#/}
  dir=${rel:-.}
  rel=${rel#pkg/}
  name=${rel//\//-}
  [ -z "$name" ] && name=druto
  if go test -c -ldflags "$ldflags" -o "$out/$name.test" "$p"; then
    echo "$dir" > "$out/$name.dir" # gpu-bench.sh runs it from there (testdata)
    echo "gpu-build: $out/$name.test"
  else
    failed+=("$p")
  fi
done
if go build -ldflags "$ldflags" -o "$out/druto" ./cmd/druto; then
  echo "gpu-build: $out/druto ($rev)"
else
  failed+=("./cmd/druto")
fi
# The Bangla fonts the plotting tests draw with (the GPU machine has none).
mkdir -p "$out/fonts"
for f in /usr/share/fonts/truetype/noto/NotoSansBengali-Regular.ttf /usr/share/fonts/truetype/lohit-bengali/Lohit-Bengali.ttf; do
  [ -f "$f" ] && cp "$f" "$out/fonts/"
done
# The PyTorch anchors run beside druto in the same GPU call: those of
# ../shared/anchors (or /work/shared/anchors from a worktree), then the
# project's fixed copies in bench/anchors over them (bench/anchors/README.md
# says what each copy changed).
mkdir -p "$out/anchors" && rm -f "$out"/anchors/*.py
for d in ../shared/anchors /work/shared/anchors; do
  if [ -d "$d" ]; then cp "$d"/*.py "$out/anchors/" && break; fi
done
chmod u+w "$out"/anchors/*.py 2>/dev/null # the shared copies are read-only
cp bench/anchors/*.py "$out/anchors/"
if [ ${#failed[@]} -gt 0 ]; then
  echo "gpu-build: FAILED: ${failed[*]}" >&2
  exit 1
fi
