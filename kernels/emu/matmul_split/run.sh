#!/usr/bin/env bash
# run.sh: the host emulator of kernels/matmul_split.cu (a development tool,
# not part of druto; no GPU needed): main.cpp compiles the .cu as C++ with
# -DDRUTO_EMU for bf16 and f16 and runs matmul_split4 and matmul_split8 as
# clusters: a cluster's blocks run at once as host threads, with the
# cluster's barrier, each block's shared memory (exactly the launcher's
# bytes) and reads of the other blocks' through the cluster; cp.async is an
# immediate copy, ldmatrix and mma.m16n8k16 are emulated from their
# specification. Each case is compared with a float64 reference of
# out = inp·Wᵀ + bias (and gelu), and run again with the clusters in
# reverse order, which must give the same bits. "OK" per case; exit 1 on a
# mismatch. EMU_FLAGS=-fsanitize=address finds shared-memory overruns.
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-matmul-split-emu
mkdir -p "$out"
rc=0
for dt in BF16 F16; do
  g++ -std=c++20 -O2 -pthread ${EMU_FLAGS:-} -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include ../flash/emu.h main.cpp -o "$out/emu_$dt"
  echo "== $dt"
  "$out/emu_$dt" || rc=1
done
exit $rc
