# session 55 call D, any card: attention_decode's dec_attend_rows (34e3748,
# build/c70) against db5352f (build/c69): druto detect's self-test and
# TestGPUDecode of the new binary, TestGPUConformance's AttentionDecode
# cases by way of detect, then BenchmarkGPUDecodeOps attention at B1, B16
# and B64 and BenchmarkGPUDecodeGraph, new and old alternating, two rounds;
# Nsight Compute's speed of light on the new kernel at B64 if time is left.
T0=$SECONDS
for c in c69 c70; do mkdir -p build/$c/x && tar -xJf build/$c/gpu.tar.xz -C build/$c/x; done
L=$OUT/calllogs-d; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); new $(cat build/c70/x/gpu/REVISION), old $(cat build/c69/x/gpu/REVISION)" | tee $L/stamp.txt
N=$PWD/build/c70/x/gpu; O=$PWD/build/c69/x/gpu
timeout 90 $N/druto detect --backend gpu > $L/detect.log 2>&1; echo "detect rc=$?"
grep -E 'attention_decode|usable|op tests|conformance|failed' $L/detect.log | cut -c1-160 | head -12
(cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 $N/gpt.test -test.v -test.run 'TestGPUDecode$' 2>&1 | grep -E '^(--- |ok|FAIL|PASS|panic)'; echo "gpt rc=$?") | tee $L/tests.log
echo "after tests $((SECONDS-T0)) s"
for r in 1 2; do for v in new:$N old:$O; do
  echo "## round $r: ${v%%:*}"
  (cd pkg/device/gpu && timeout 60 ${v#*:}/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|16|64)/attention$' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic')
  (cd pkg/gpt && timeout 60 ${v#*:}/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/bench.log | sed -E 's/ +[0-9]+ ns\/op//' | cut -c1-190
echo "after bench $((SECONDS-T0)) s"
if [ $((SECONDS-T0)) -lt 300 ]; then
  (cd pkg/device/gpu && timeout 60 ncu --clock-control none --cache-control none --graph-profiling node \
    --kernel-name regex:attention_decode --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy --section SchedulerStats \
    $N/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B64/attention$' -test.benchtime 1x 2>&1 \
    | grep -vE '^==PROF==|^\s*$|^(goos|goarch|pkg|cpu):') > $L/ncu-att64.log 2>&1
  grep -E 'Duration|DRAM Throughput|Registers|Achieved Occupancy|Eligible Warps' $L/ncu-att64.log | cut -c1-120
fi
tar -czf $OUT/calllogs-d.tar.gz -C $OUT calllogs-d; rm -rf $L
echo "total $((SECONDS-T0)) s"
