#!/usr/bin/env bash
# ab.sh (call 1 of session 19): A/B of layernorm kernel variants on the H200.
# Binaries in build/ab: druto-{A..E}, device-gpu-B.test.
set -uo pipefail
cd "$(dirname "$0")/../.."
AB=build/ab
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
for f in $AB/*.xz; do if command -v xz >/dev/null; then xz -d -T8 "$f"; else python3 -c "import lzma,sys; open(sys.argv[1][:-3],'wb').write(lzma.open(sys.argv[1]).read())" "$f"; fi; done
chmod +x $AB/druto-* $AB/*.test
L=$OUT/ab.log
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; date -u; cat $AB/REVISIONS; } > $L
OPS=copy,layernorm_fwd,residual_layernorm_fwd,layernorm_bwd
run() { echo "## round $1 variant $2 $(date -u +%T)"; DRUTO_SELFTEST=report timeout 90 $AB/druto-$2 bench --backend gpu --kernels --ops $OPS --json $OUT/k-$1-$2.json 2>&1 | grep -v cuBLASLt; echo "rc=$?"; }
for v in A B C D E; do run 1 $v; done >> $L 2>&1
for v in E D C B A; do run 2 $v; done >> $L 2>&1
# correctness of B: the TMA kernels bit for bit against the plain ones, no local memory, conformance
{ echo "## tests B $(date -u +%T)"; (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 100 ../../$AB/device-gpu-B.test -test.v -test.count=1 -test.run 'TestGPULayerNorm(Forward|Backward)TMA|TestGPUBuildAndCache|TestGPUStreamRows') 2>&1 | grep -E '^(--- |=== RUN|ok|FAIL|PASS)|tma|TMA|local' | grep -v '^=== RUN' | head -80
  for v in C E; do echo "## tests $v"; (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 60 ../../$AB/device-gpu-$v.test -test.v -test.count=1 -test.run 'TestGPULayerNorm(Forward|Backward)TMA|TestGPUBuildAndCache') 2>&1 | grep -E '^(--- |ok|FAIL|PASS)' | head -20; done; } > $OUT/tests.log 2>&1
# ncu on B's kernels
type -P ncu >/dev/null || PATH=$PATH:$(ls -d /opt/nvidia/nsight-compute/*/ /usr/local/cuda/bin 2>/dev/null | tr '\n' ':')
{ for pair in layernorm_fwd=layernorm_forward_tma_rf32 residual_layernorm_fwd=layernorm_forward_tma_rf32 layernorm_bwd=layernorm_backward_tma_rf32 layernorm_bwd=layernorm_reduce; do
  op=${pair%%=*} k=${pair#*=}; echo "## ncu $op: $k $(date -u +%T)"
  DRUTO_SELFTEST=report timeout 60 ncu --clock-control none -k "regex:^$k\$" -s 8 -c 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats --section WarpStateStats \
    --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum $AB/druto-B bench --backend gpu --kernels --ops $op 2>&1 | grep -v '^==PROF==\|cuBLASLt' | sed -n '/Section\|dram__\|gpu__time\|lts__\|Duration\|Throughput\|Registers\|Occupancy\|Stall\|Warp Cycles\|Shared Memory\|Block Limit\|Grid Size\|Block Size/p' | head -70
done; } > $OUT/ncu.log 2>&1
echo "== summary"; grep -E '^## round|layernorm|copy ' $L | grep -E 'round|stream|fused ' | head -120
