#!/usr/bin/env bash
# run.sh: the host emulator of kernels/adamw.cu's adamw_bf16m (bf16 AdamW
# moments, stochastic rounding; a development tool, not part of druto; no
# GPU needed): main.cpp compiles the .cu as C++ with -DDRUTO_EMU and
# -ffp-contract=off (the kernel's explicitly rounded intrinsics as plain
# fp32 operations), runs one step on the inputs of pkg/device/cpu's
# TestAdamWBF16Golden and compares the hash of the master, m and v bits
# with that test's adamGoldenSum: "OK" when the CUDA source and the CPU
# twin give the same bits, for f32, bf16 and f16 working copies.
#
#   ./run.sh
set -euo pipefail
cd "$(dirname "$0")"
want=$(sed -n 's/^const adamGoldenSum = \(0x[0-9a-f]*\)$/\1/p' ../../../pkg/device/cpu/adamw_test.go)
out=${TMPDIR:-/tmp}/druto-adamw-emu
mkdir -p "$out"
rc=0
for dt in F32 BF16 F16; do
  g++ -std=c++20 -O2 -ffp-contract=off -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
  line=$("$out/emu_$dt") || rc=1
  got=$(echo "$line" | sed -n 's/^hash \(0x[0-9a-f]*\),.*/\1/p')
  if [ "$got" = "$want" ] && [ $rc -eq 0 ]; then echo "$dt OK: $line"; else echo "$dt FAIL: $line, want hash $want"; rc=1; fi
done
exit $rc
