#!/usr/bin/env bash
# run.sh: the host emulator of kernels/matmul_tc.cu's matmul_rows_tc, the
# linear layers of a decode step at 9 to 64 rows on the tensor cores (a
# development tool, not part of druto; no GPU needed): main.cpp compiles
# the .cu as C++ with -DDRUTO_EMU for bf16 and f16, emulates mma.m16n8k16,
# runs every column tile and warp span on host threads, blocks in order and
# reversed, with and without the bias and the GELU epilogue, and compares
# with a float64 reference. "OK" per case; exit 1 on a mismatch.
# TestMatmulTCEmulatorMatchesCPU (pkg/device/gpu) runs it against the CPU
# device on GPT-2's shapes.
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-matmul-tc-emu
mkdir -p "$out"
rc=0
for dt in BF16 F16; do
  g++ -std=c++20 -O2 -pthread -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
  echo "== $dt"
  "$out/emu_$dt" || rc=1
done
exit $rc
