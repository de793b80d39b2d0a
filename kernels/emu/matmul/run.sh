#!/usr/bin/env bash
# run.sh: the host emulator of kernels/matmul.cu's matmul_rows, the linear
# layers of a decode step (a development tool, not part of druto; no GPU
# needed): main.cpp compiles the .cu as C++ with -DDRUTO_EMU for f32, bf16
# and f16, runs matmul_rows on host threads for every split of a column
# over warps (ks), the vector and scalar paths, with and without the bias
# and the GELU epilogue, and compares with a float64 reference. "OK" per
# case; exit 1 on a mismatch.
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-matmul-emu
mkdir -p "$out"
rc=0
for dt in F32 BF16 F16; do
  g++ -std=c++20 -O2 -pthread -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
  echo "== $dt"
  "$out/emu_$dt" || rc=1
done
exit $rc
