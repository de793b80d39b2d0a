#!/usr/bin/env bash
# run.sh: builds the host emulator of kernels/adamw_fp8.cu's adamw_fp8_e4m3
# for each dtype (a development tool, not part of druto; no GPU needed).
# pkg/device/gpu's TestAdamWFP8EmulatorMatchesCPU builds the same binary
# and checks it against pkg/device/cpu's AdamWStateFP8 (go test).
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-adamw-fp8-emu
mkdir -p "$out"
for dt in F32 BF16 F16; do
  g++ -std=c++20 -O1 -pthread -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
  echo "built $out/emu_$dt"
done
