#!/usr/bin/env bash
# run.sh: the host emulator of kernels/fp8.cu's cast_transpose_e4m3 and
# cast_transpose_e5m2, layernorm_fp8_e4m3 and residual_layernorm_fp8_e4m3
# (a development tool, not part of druto; no GPU
# needed): main.cpp compiles the .cu as C++ with -DDRUTO_EMU for f32, bf16
# and f16, with the PTX conversion cvt.rn.satfinite.{e4m3,e5m2}x2.f32
# written in C++ from its definition. It first checks that conversion
# against an independent reference (the nearest value of the format found
# by search over its decoded codes, ties to even) on every FP8 value, every
# midpoint and its float neighbours, specials and a float32 sweep; then it
# runs the kernels on host threads (fp8.go's grid and block) on random x
# with ±0, NaN, ±Inf, subnormals and values past max, both formats, the
# vector and the scalar paths, and checks q against the reference of x·s,
# qt = qᵀ bit for bit, and amax = max |x| (NaN with a NaN). Then the
# layernorm producers (emu ln N C), plain and residual, on rows whose y·s
# saturates and flushes, with infinite weights (amax Inf) and with NaN and
# Inf in the rows (amax NaN), with the paths the launcher takes and with
# every path scalar, against layernorm.cu's own row function
# (layernorm.cuh) run as its forward runs it: mean, rstd and res the same
# bits, q = the reference conversion of y·s, qt = qᵀ, amax = max |y|, and
# layernorm.cu's T output = y rounded to T. "OK" per case; exit 1 on a
# mismatch. pkg/device/gpu's TestFP8EmulatorMatchesCPU and
# TestLayerNormFP8EmulatorMatchesCPU run the same binary against pkg/tensor's
# conversions and pkg/device/cpu's twins (go test), and
# TestLayerNormBackwardCastFP8EmulatorMatchesCPU runs
# layernorm_backward_cast_e5m2 through it (emu lbio; no mode here). Slow (a host thread per
# CUDA thread): the layernorm shapes take about a minute per dtype.
#
#   ./run.sh             the default shapes, f32, bf16 and f16
#   ./run.sh N C         one shape, both kernel families
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-fp8-emu
mkdir -p "$out"
for dt in F32 BF16 F16; do
  g++ -std=c++20 -O2 -pthread -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
done
rc=0
"$out/emu_F32" selftest || rc=1
if [ $# -ge 2 ]; then shapes=("$1 $2"); lnshapes=("$1 $2"); else
  # 1, 17, 33, 100, 1000: partial tiles and the scalar paths; 64, 128, 192:
  # whole tiles and both vector paths; 48 × 200, 96 × 1000: one vector path
  shapes=("1 1" "1 17" "17 1" "33 100" "100 33" "64 64" "128 192" "200 48" "96 1000" "1000 1000")
  # layernorm: C 1, 33 (odd) and over 1024 (1280, 1600: GPT-2 large and
  # xl; 3584, the widest) the three-pass rows, 64, 100, 768 and 1024 the
  # rows in registers; N 5, 17, 33, 65, 70: a partial block and partial
  # 16-row chunks of qt, 80 and 128: N % 16 == 0 (qt's vector stores)
  lnshapes=("5 1" "17 100" "33 33" "80 768" "65 1024" "128 64" "70 1280" "40 1600" "3 3584")
fi
for s in "${shapes[@]}"; do
  for dt in F32 BF16 F16; do
    # shellcheck disable=SC2086
    "$out/emu_$dt" $s || rc=1
  done
done
for s in "${lnshapes[@]}"; do
  for dt in F32 BF16 F16; do
    # shellcheck disable=SC2086
    "$out/emu_$dt" ln $s || rc=1
  done
done
exit $rc
