#!/usr/bin/env bash
# run.sh: the host emulator of kernels/matmul_mma.cu, the decode step's
# linear layers at 9 to 64 rows (a development tool, not part of druto; no
# GPU needed): main.cpp compiles the .cu as C++ with -DDRUTO_EMU for bf16
# and f16 (harness.h emulates mma.sync), runs matmul_mma over one to many
# slices of C (the blocks first to last and last to first, which must give
# the same bits), with and without the bias and the GELU epilogue, and
# compares with a float64 reference. "OK" per case; exit 1 on a mismatch.
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-matmul-mma-emu
mkdir -p "$out"
rc=0
for dt in BF16 F16; do
  g++ -std=c++20 -O2 -pthread ${EMU_FLAGS:-} -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
  echo "== $dt"
  "$out/emu_$dt" || rc=1
done
exit $rc
