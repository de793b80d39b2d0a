#!/usr/bin/env bash
# run.sh: build lnlab.cu with the GPU machine's nvcc and run it, then
# Nsight Compute on one launch each of druto's three layernorm kernels.
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; nvcc --version | tail -2; git -C ../../../.. rev-parse HEAD 2>/dev/null; } > $OUT/env.log 2>&1
nvcc -O3 -std=c++17 -arch=sm_90a -I../../../../kernels lnlab.cu -o /tmp/lnlab -Xptxas -v > $OUT/ptxas.log 2>&1 || { echo build failed; tail -30 $OUT/ptxas.log; exit 1; }
timeout 240 /tmp/lnlab > $OUT/lab.log 2>&1; echo "lab rc=$?" >> $OUT/lab.log
cat $OUT/lab.log
for k in layernorm_backward_tma_rf32 layernorm_forward_rf32 residual_layernorm_forward_rf32; do
  timeout 120 ncu --clock-control none -k regex:"^$k\$" -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section Occupancy --section LaunchStats /tmp/lnlab once > $OUT/ncu-$k.log 2>&1
  echo "ncu $k rc=$?"; grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Warp Cycles Per Issued|Stall|Registers Per|Theoretical Occ|One or More|No Eligible" $OUT/ncu-$k.log | head -20
done
