# session 53 call H (build/c58, 8b815e9), any card: Nsight Compute on
# matmul_split as BenchmarkGPUDecodeOps launches it (each kernel alone),
# B64 qkv (cluster 4), B64 fc_proj (cluster 8) and B1 qkv/split: why it is
# slower than cuBLASLt and matmul_rows (call G).
T0=$SECONDS
[ -x build/gpu/device-gpu.test ] || { rm -rf build/gpu && tar -xJf build/c58/gpu.tar.xz -C build; }
L=$OUT/calllogs-h; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)" | tee $L/stamp.txt
cd pkg/device/gpu
for op in B64/qkv B64/fc_proj B1/qkv/split; do
  echo "## ncu $op"
  timeout 150 ncu --clock-control none --cache-control none --graph-profiling node --kernel-name regex:matmul_split \
    --launch-skip 2 --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section SchedulerStats --section SourceCounters \
    ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench "BenchmarkGPUDecodeOps/$op\$" -test.benchtime 1x 2>&1 | grep -vE '^Benchmark|^PASS|^gpu test'
done > $L/ncu.log 2>&1
grep -E '^## |Duration|DRAM Throughput|Memory Throughput|Compute \(SM\)|Registers|Shared Memory Config|Dynamic Shared|Achieved Occupancy|Theoretical Occ|Block Limit|Waves Per SM|Cluster|Eligible|Active Warps|No Eligible|Issued Warp|Stall|L2 Hit|L1/TEX Hit|Mem Busy|Max Bandwidth' $L/ncu.log | cut -c1-150 | head -120
cd ../../..
tar -czf $OUT/calllogs-h.tar.gz -C $OUT calllogs-h; rm -rf $L
echo "total $((SECONDS-T0)) s"
