#!/usr/bin/env bash
# run.sh: the host emulator of kernels/fp8transpose.cu's transpose_fp8 (a
# development tool, not part of druto; no GPU needed): main.cpp compiles
# the .cu as C++ with -DDRUTO_EMU and runs its fixed cases (selftest).
# pkg/device/gpu's TestTransposeFP8EmulatorMatchesCPU builds the same
# binary and checks it against pkg/device/cpu's TransposeFP8 (go test).
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-fp8transpose-emu
mkdir -p "$out"
g++ -std=c++20 -O1 -pthread -DDRUTO_EMU -DDTYPE=DRUTO_F32 -I../.. -include ../flash/emu.h main.cpp -o "$out/emu"
"$out/emu" selftest
