#!/usr/bin/env bash
# s40 call B: decode after matmul_rows' batched loads (issue 34): detect + sample, an A/B of druto bench --sample
# against 41f1ebc's binary (build/gpu/old), the GPU tests of the changed kernel, the decode-op breakdown; then
# issue 37's small and tiny against PyTorch's whole-step CUDA graph with what time is left.
set -uo pipefail
[ -x build/gpu/druto ] || { mkdir -p build/gpu && tar xJf build/carry2/gpu.tar.xz -C build/gpu; }
cat build/gpu/REVISION; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$SECONDS; S=$OUT
timeout 150 scripts/gpu-bench.sh detect sample
mkdir -p /tmp/lg && tar xzf $S/logs.tar.gz -C /tmp/lg && rm -f $S/logs.tar.gz && tar czf $S/chk.tar.gz -C /tmp/lg .
echo "detect+sample: $((SECONDS-T0)) s"
mkdir -p /tmp/ab
for r in 1 2; do for v in new old; do
  b=build/gpu/druto; [ $v = old ] && b=build/gpu/old/druto
  echo "## round $r $v ($($b version 2>/dev/null | head -1))"
  timeout 60 $b bench --sample --backend gpu --configs gpt2-124M:1x16,gpt2-124M:64x16 --modes fused+bf16 --tokens 256 --json /tmp/ab/$v-$r.json 2>&1 | grep -v "^step"
done; done > /tmp/ab/ab.log 2>&1
tar czf $S/ab.tar.gz -C /tmp/ab .
echo "a/b: $((SECONDS-T0)) s"
(cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 150 ../../../build/gpu/device-gpu.test -test.run 'TestGPUBuildAndCache|TestGPUConformance|TestGPUGraphChunkedHead|TestGPUStreamRows' -test.v) > /tmp/tests-gpu.txt 2>&1
(cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 ../../build/gpu/gpt.test -test.run 'TestGPUDecode' -test.v) > /tmp/tests-gpt.txt 2>&1
{ grep -E "^(--- |ok|PASS|FAIL)" /tmp/tests-gpu.txt /tmp/tests-gpt.txt; grep -E "local [1-9]" /tmp/tests-gpu.txt; grep -E "matmul_rows" /tmp/tests-gpu.txt | head -3; grep -B2 -A12 -- "--- FAIL" /tmp/tests-gpu.txt /tmp/tests-gpt.txt | head -150; } > $S/tests.txt
echo "tests: $((SECONDS-T0)) s"
(cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 60 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps' -test.benchtime 20x -test.v) > $S/decodeops.txt 2>&1
(cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x -test.v) >> $S/decodeops.txt 2>&1
echo "decode ops: $((SECONDS-T0)) s"
left=$((585 - (SECONDS-T0)))
if [ $left -gt 240 ]; then
  CONFIG="small tiny" FLOOR=0 MODES=bf16-cudnn-eager-wholegraph,bf16-cudnn-compile-wholegraph,bf16-cudnn-compile \
    COMPARE_DEADLINE=$(( (left - 30) / 2 - 20 )) COMPARE_BUILD_BUDGET=$(( (left - 30) / 2 - 80 )) COMPARE_TIMEOUT=$(( (left - 30) / 2 )) \
    timeout $((left - 10)) scripts/gpu-bench.sh compare
fi
echo "done: $((SECONDS-T0)) s"
ls -la $S
