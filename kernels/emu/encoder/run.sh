#!/usr/bin/env bash
# run.sh: the host emulator of kernels/encoder.cu (a development tool, not
# part of druto; no GPU needed): main.cpp runs the forward and the sorted
# backward with encoder.go's launch plan and compares them with a reference
# in the CPU device's order, and the backward with itself (blocks in reverse
# order). Slow (a host thread per CUDA thread): keep the shapes small.
#
#   ./run.sh                      a default set of shapes, f32 and bf16
#   ./run.sh B T C V SMS DIST     one shape (DIST: uniform hot one zipf bad)
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-encoder-emu
mkdir -p "$out"
for dt in F32 BF16; do
  g++ -std=c++20 -O2 -pthread -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
done
if [ $# -ge 6 ]; then shapes=("$1 $2 $3 $4 $5 $6"); else
  # single elements; V 3 and 1: few long runs; every token one id; V 5 hot;
  # C 1100: two channel trips; tokens outside [0,V); V 300 (2 passes,
  # 2 tiles: the look-back); byte-corpus Zipf in GPT-2's vocabulary; B·T
  # 70049 (18 tiles, not a multiple of anything) at V 2^20 (3 passes); B·T
  # 65005 over 254 segments; the small preset and the gpt2 bench with byte
  # tokens on an H200 (132 SMs)
  shapes=("1 1 1 1 4 uniform" "32 256 8 256 132 zipf" "16 1024 4 50304 132 zipf" "3 17 96 3 4 uniform" "2 300 32 1 4 one" "3 200 20 5 4 hot" "2 1100 8 2000 4 hot"
          "2 700 40 1500 4 zipf" "3 90 1100 6 4 hot" "2 500 36 2000 4 bad" "2 2100 8 300 4 uniform"
          "4 1000 20 50304 16 zipf" "4 1000 24 50304 16 uniform" "2 1000 16 50304 16 one"
          "7 10007 4 1048576 8 uniform" "7 10007 4 1048576 8 one" "5 13001 4 50304 132 zipf")
fi
rc=0
for s in "${shapes[@]}"; do
  for dt in F32 BF16; do
    # shellcheck disable=SC2086
    printf "%-5s " "$dt"; "$out/emu_$dt" $s || rc=1
  done
done
exit $rc
