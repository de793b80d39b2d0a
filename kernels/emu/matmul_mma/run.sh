#!/usr/bin/env bash
# run.sh: the host emulator of kernels/matmul_mma.cu's matmul_rows_mma (a
# development tool, not part of druto; no GPU needed): main.cpp compiles
# the .cu as C++ with -DDRUTO_EMU for bf16 and f16, runs the kernel on host
# threads (mma.m16n8k16 emulated from its specification) for every split
# of C over a block's warps (KS 1, 2, 4, 8) and rows 1 to 64, and compares
# with a float64 reference of out = inp·Wᵀ + bias (and gelu). "OK" per
# case; exit 1 on a mismatch. EMU_FLAGS=-fsanitize=address finds overruns.
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
