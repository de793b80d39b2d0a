# session 55 call B, any card: db5352f (decode_token deleted; build/c69:
# device-gpu, gpt, cuda tests and druto). gpu-bench.sh detect, tests (the GPU
# test binaries) and sample (druto bench --sample with torch_sample_bench.py
# beside it); then BenchmarkGPUDecodeGraph B1 and B64, and while time is
# left Nsight Compute on attention_decode at batch 64 (why it reads at about
# half of DRAM peak).
T0=$SECONDS
rm -rf build/gpu && tar -xJf build/c69/gpu.tar.xz -C build
L=$OUT/calllogs-b; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)" | tee $L/stamp.txt
TESTS_BUDGET=240 TEST_TIMEOUT=200 OUT=$L bash scripts/gpu-bench.sh detect tests sample > $L/gpu-bench.out 2>&1; echo "gpu-bench rc=$?"
tail -5 $L/gpu-bench.out; cat $L/tests-summary.txt 2>/dev/null | head -20
echo "after gpu-bench $((SECONDS-T0)) s"
(cd pkg/gpt && timeout 90 ../../build/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic|rror') | tee $L/graph.log | cut -c1-200
echo "after graph $((SECONDS-T0)) s"
if [ $((SECONDS-T0)) -lt 430 ]; then
  (cd pkg/device/gpu && timeout 90 ncu --clock-control none --cache-control none --graph-profiling node \
    --kernel-name regex:attention_decode --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats \
    ../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B64/attention$' -test.benchtime 1x 2>&1 \
    | grep -vE '^==PROF==|^\s*$|^(goos|goarch|pkg|cpu):') > $L/ncu-att64.log 2>&1
  grep -E 'Duration|DRAM Throughput|Memory Throughput|L2 Hit|Achieved Occupancy|Warp Cycles Per Issued|Stall|Issued Warp|Eligible' $L/ncu-att64.log | cut -c1-150 | head -30
fi
tar -czf $OUT/calllogs-b.tar.gz -C $OUT calllogs-b; rm -rf $L
echo "total $((SECONDS-T0)) s"
