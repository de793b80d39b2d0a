#!/usr/bin/env bash
# run.sh: the host emulator of kernels/decode.cu (a development tool, not
# part of druto; no GPU needed): main.cpp compiles the .cu as C++ with
# -DDRUTO_EMU for f32, runs attention_decode with its append and merge (on
# grids of one to all splits' blocks a pair, the blocks first to last and
# last to first, which must give the same bits), sample_rows under greedy,
# temperature, top-k and top-p draws (logits with ties, masked and needing
# tokens) and kv_append, and compares them with references of the ops'
# definitions. "OK" per case; exit 1 on a mismatch.
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-decode-emu
mkdir -p "$out"
g++ -std=c++20 -O2 -pthread ${EMU_FLAGS:-} -DDRUTO_EMU -DDTYPE=DRUTO_F32 -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_F32"
"$out/emu_F32"
