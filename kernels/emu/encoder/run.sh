#!/usr/bin/env bash
# run.sh: the host emulator of kernels/encoder.cu (a development tool, not
# part of druto; no GPU needed): main.cpp runs the forward and the backward
# with encoder.go's launch plan on random tokens and compares them with a
# reference in the CPU device's order. Slow (a host thread per CUDA
# thread): keep the shapes small.
#
#   ./run.sh                      a default set of shapes, f32 and bf16
#   ./run.sh B T C V SMS HOT      one shape
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-encoder-emu
mkdir -p "$out"
for dt in F32 BF16; do
  g++ -std=c++20 -O2 -pthread -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
done
if [ $# -ge 6 ]; then shapes=("$1 $2 $3 $4 $5 $6"); else
  # V 3 and 1: split positions; V 1000 hot: one id over several flushes;
  # V 2000 (> 1024, 4 SMs: K 250): sorted flushes; C 20: scalar forward
  shapes=("1 1 1 1 4 0" "3 17 96 3 4 0" "2 17 100 50 4 0" "2 300 32 1 4 0" "3 200 20 5 4 1"
          "2 1100 8 1000 4 1" "2 1100 8 2000 4 1" "2 500 36 2000 4 0" "2 40 600 2000 4 1" "3 90 1100 6 4 1" "4 300 300 3000 4 0" "2 700 40 1500 4 1")
fi
rc=0
for s in "${shapes[@]}"; do
  for dt in F32 BF16; do
    # shellcheck disable=SC2086
    printf "%-5s " "$dt"; "$out/emu_$dt" $s || rc=1
  done
done
exit $rc
