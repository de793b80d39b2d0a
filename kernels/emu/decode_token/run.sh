#!/usr/bin/env bash
# run.sh: the host emulator of kernels/decode_token.cu (a development tool,
# not part of druto; no GPU needed): main.cpp compiles the .cu as C++ with
# -DDRUTO_EMU for bf16 and f16 with DT_THREADS 128 (every thread of every
# block is a host thread at once: harness.h's launch_grid; the blocks wait
# for each other), runs a decode step of a few layers on grids of heads and
# workers (pos 0, 1, past the staged rows, the whole cache), twice a case,
# and compares out, the last x and the caches' rows pos with a float64
# reference of the ops one by one; then bf16 with the kernel's own 512
# threads on three of the cases. "OK" per case; exit 1 on a mismatch.
# EMU_FLAGS=-fsanitize=address: the blocks get exactly their shared
# memory's bytes, so an access past them shows.
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-decode-token-emu
mkdir -p "$out"
rc=0
build() { # dtype threads
  g++ -std=c++20 -O2 -pthread ${EMU_FLAGS:-} -DDRUTO_EMU -DDTYPE=DRUTO_$1 -DDT_THREADS=$2 -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$1_$2"
}
for dt in BF16 F16; do
  build $dt 128
  echo "== $dt"
  "$out/emu_${dt}_128" || rc=1
done
build BF16 512
echo "== BF16, DT_THREADS 512"
"$out/emu_BF16_512" 0 1 3 || rc=1
exit $rc
