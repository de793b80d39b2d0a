#!/usr/bin/env bash
# run.sh: the host emulator of kernels/flash_attention.cu (a development
# tool, not part of druto; no GPU needed). It compiles the .cu as C++ with
# -DDRUTO_EMU: mma.sync m16n8k16, ldmatrix(.trans) and the packs are
# implemented from the PTX specification (main.cpp), each CUDA thread is a
# host thread, warps and CTAs synchronise with std::barrier. It runs
# forward, flash_bwd_dot, the backward and flash_bwd_dq on random inputs
# and compares out, lse, dq, dk and dv with a float64 reference; "OK" when
# the relative errors are within bf16/f16 rounding. Slow (thousands of
# threads): keep T to a few hundred.
#
#   ./run.sh                 a default set of shapes, bf16 and f16
#   ./run.sh B NH T HS [V]   one shape (HS 32, 64 or 128); V 2 runs
#                            flash_attention2.cu's forward and backward
#                            (flash_bwd2kv + flash_bwd2q) (default: 1 2)
#   EMU_ZERO_D0=1 ./run.sh   gradients from 0 instead of random starting
#                            values (tighter: no rounding of those)
#   EMU_STORE=1 ./run.sh     variants 2 and 3 in the store form
#                            (AttentionBackwardStore): dqkv NaN-poisoned,
#                            every gradient written, never read
set -euo pipefail
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/druto-flash-emu
mkdir -p "$out"
for dt in BF16 F16; do
  g++ -std=c++20 -O2 -pthread -DDRUTO_EMU -DDTYPE=DRUTO_$dt -I../.. -include emu.h main.cpp -o "$out/emu_$dt"
done
# F16_K8: f16 as the T4 runs it, each k16 step as two mma.m16n8k8
g++ -std=c++20 -O2 -pthread -DDRUTO_EMU -DDRUTO_EMU_K8 -DDTYPE=DRUTO_F16 -I../.. -include emu.h main.cpp -o "$out/emu_F16_K8"
if [ $# -ge 4 ]; then shapes=("$1 $2 $3 $4"); else shapes=("1 1 1 32" "1 1 17 64" "1 2 130 32" "2 1 64 128" "1 1 130 128" "2 2 65 64" "1 1 300 64" "1 1 257 128" "1 2 200 32" "1 1 384 64" "2 1 161 128"); fi
if [ $# -ge 5 ]; then variants=("$5"); else variants=(1 2); fi
rc=0
for s in "${shapes[@]}"; do
  for v in "${variants[@]}"; do
    # variant 2 (flash_attention2.cu) is sm_80+: no F16_K8 (sm_75) form
    for dt in BF16 F16 F16_K8; do
      [ "$v" != 1 ] && [ "$dt" = F16_K8 ] && continue
      # shellcheck disable=SC2086
      printf "%-7s " "$dt"; "$out/emu_$dt" $s "$v" || rc=1
    done
  done
done
exit $rc
