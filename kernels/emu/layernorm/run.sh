#!/usr/bin/env bash
# run.sh: the host emulator of kernels/layernorm_async.cu (a development
# tool, not part of druto; no GPU needed). main.cpp compiles layernorm.cu and
# layernorm_async.cu as C++ with -DDRUTO_EMU, runs every CUDA thread as a
# host thread, and implements cp.async as per-thread queues of copies that
# land at the thread's cp.async.wait_group (shared memory starts as NaN, so
# a row read before its copies arrived shows), or at once with EMU_EAGER=1
# (a slot refilled before its row was consumed shows). For each shape it
# checks that the async forward, residual forward (also in place) and
# backward give the same bits as layernorm.cu's fast path (out, mean, rstd,
# res, dinp), that out is within a few roundings of a float64 reference and
# that the dweight/dbias partials, added, are within 1e-6 of theirs.
#
#   ./run.sh                          a default set of shapes, every dtype pair, 2-4 stages
#   ./run.sh N C BLOCKS STAGES RF32   one case
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-layernorm-emu
mkdir -p "$out"
for dt in F32 BF16 F16; do
  g++ -std=c++20 -O2 -pthread -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
done
if [ $# -ge 5 ]; then cases=("$1 $2 $3 $4 $5"); else
  # C 768: GPT-2's row; 1024: the widest fast-path row; 772: groups that do
  # not fill the warp's last pass; 4: one group. N: fewer rows than warps
  # (1), several rows per warp with a partial last round (37, 130), rows
  # that wrap the slots more than once (2-4 stages).
  cases=("1 768 1 2" "37 768 2 3" "130 768 3 4" "21 1024 1 2" "45 772 2 4" "9 4 1 3" "64 96 5 2" "200 128 2 4")
fi
rc=0
for c in "${cases[@]}"; do
  for dt in F32 BF16 F16; do
    for rf in 0 1; do
      [ $# -lt 5 ] && [ "$dt" = F32 ] && [ "$rf" = 1 ] && continue # f32/f32 is the uniform pair
      for mode in late eager; do
        args=$c; [ $# -lt 5 ] && args="$c $rf"
        # shellcheck disable=SC2086
        printf "%-5s " "$dt"; if [ $mode = eager ]; then EMU_EAGER=1 "$out/emu_$dt" $args || rc=1; else "$out/emu_$dt" $args || rc=1; fi
      done
    done
  done
done
exit $rc
