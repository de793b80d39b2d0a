# session 55 call C, any card: db5352f (build/c69). Nsight Compute on
# attention_decode at batch 64 (call B's ncu line ran from the wrong folder),
# then TestGPUConformance alone (call B's shard hit the 200 s limit set for
# it, inside the test).
T0=$SECONDS
rm -rf build/gpu && tar -xJf build/c69/gpu.tar.xz -C build
L=$OUT/calllogs-c; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)" | tee $L/stamp.txt
(cd pkg/device/gpu && timeout 120 ncu --clock-control none --cache-control none --graph-profiling node \
  --kernel-name regex:attention_decode --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section Occupancy --section SchedulerStats --section LaunchStats \
  ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B64/attention$' -test.benchtime 1x 2>&1 \
  | grep -vE '^==PROF==|^\s*$|^(goos|goarch|pkg|cpu):') > $L/ncu-att64.log 2>&1
echo "ncu rc=$? after $((SECONDS-T0)) s"
grep -E 'Duration|DRAM Throughput|Memory Throughput|L2 Hit|L1/TEX Hit|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Issued Warp|Eligible|Registers Per|Grid Size|Block Size|Block Limit' $L/ncu-att64.log | cut -c1-150 | head -40
(cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 DRUTO_GPU_FEATURE_TESTS=require DRUTO_NVRTC_TESTS=require timeout 330 ../../../build/gpu/device-gpu.test -test.v -test.run '^TestGPUConformance$' 2>&1) > $L/conformance.log 2>&1
echo "conformance rc=$? after $((SECONDS-T0)) s"
grep -E '^(--- |ok|FAIL|PASS|panic)|results|failed' $L/conformance.log | cut -c1-200 | tail -8
tar -czf $OUT/calllogs-c.tar.gz -C $OUT calllogs-c; rm -rf $L
echo "total $((SECONDS-T0)) s"
