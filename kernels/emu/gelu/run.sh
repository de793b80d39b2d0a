#!/usr/bin/env bash
# run.sh: the host emulator of kernels/gelu.cu's gelu_bias_backward (a
# development tool, not part of druto; no GPU needed): main.cpp compiles the
# .cu as C++ with -DDRUTO_EMU (ex2/rcp as exp2f and 1/x, the scalar
# rounding of common.cuh), runs the kernel with matmul_gelu.go's launch
# plan (a strip of 32·W columns and a chunk of rows per CTA) on random
# inputs, then the chunk sums as matmul_bias_grad adds them, and compares
# dpre and the bias gradient with a float64 reference of the tanh form
# (pkg/device/cpu's geluGrad); it also checks that a second run gives the
# same bits (no atomics) and that the vector and scalar paths agree.
# "OK" when dpre is within one rounding of the dtype and the sums within
# fp32 rounding.
#
#   ./run.sh                  a default set of shapes, f32, bf16 and f16
#   ./run.sh N C ROWS         one shape (ROWS: rows per chunk, a multiple of 8)
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-gelu-emu
mkdir -p "$out"
for dt in F32 BF16 F16; do
  g++ -std=c++20 -O2 -pthread -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
done
if [ $# -ge 3 ]; then shapes=("$1 $2 $3"); else
  # C 3072: GPT-2's 4C, vectors; C 1000 / 100: a partial strip; C 37, 1:
  # the scalar path; N not a multiple of the chunk or of 16 (the pipelined
  # pairs of rows)
  shapes=("1 1 8" "17 1000 8" "40 3072 16" "33 100 24" "100 37 32" "5 8 8" "64 256 64" "203 264 40")
fi
rc=0
for s in "${shapes[@]}"; do
  for dt in F32 BF16 F16; do
    # shellcheck disable=SC2086
    printf "%-5s " "$dt"; "$out/emu_$dt" $s || rc=1
  done
done
exit $rc
