# session 52 call D (build/c55, 3dd27e4), any card: where batch 64's linear
# layers spend their time. BenchmarkGPUDecodeOps at B64 for the four
# products (cuBLASLt by default, "/lt" the same; matmul_rows_tc's plans),
# then Nsight Compute on each product's kernels alone (--graph-profiling
# node: the kernel's own duration, against its time a call in a replayed
# graph of 24), cuBLASLt and matmul_rows_tc (DRUTO_MATMUL_TC=on), and
# attention_decode at B64.
T0=$SECONDS
[ -f build/gpu/REVISION ] && [ "$(cat build/gpu/REVISION)" = "$(tar -xJf build/c55/gpu.tar.xz -O gpu/REVISION)" ] || { rm -rf build/gpu && tar -xJf build/c55/gpu.tar.xz -C build; }
L=$OUT/calllogs-d; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)" | tee $L/stamp.txt
(cd pkg/device/gpu && timeout 90 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B64/(qkv|attn_proj|fc_gelu|fc_proj)' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic') \
  | tee $L/ops.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecodeOps//; s/-16 +\t +[0-9]+\t+ +/ /'
echo "after ops $((SECONDS-T0)) s"
for spec in "lt:qkv" "lt:fc_proj" "lt:attn_proj" "tc:qkv" "tc:fc_proj" "lt:attention"; do [ $((SECONDS-T0)) -gt 420 ] && break
  mode=${spec%%:*} op=${spec#*:}
  env=""; [ $mode = tc ] && env="DRUTO_MATMUL_TC=on"
  echo "## ncu $mode B64/$op"
  (cd pkg/device/gpu && env $env timeout 60 ncu --clock-control none --cache-control none --graph-profiling node \
    --launch-skip 1 --launch-count 3 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats \
    ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench "BenchmarkGPUDecodeOps/B64/$op\$" -test.benchtime 1x 2>&1 \
    | grep -vE '^==PROF==|^\s*$|^(goos|goarch|pkg|cpu):')
done > $L/ncu.log 2>&1
grep -E '^## |^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Grid Size|Registers Per|Achieved Occupancy|Warp Cycles Per Issued' $L/ncu.log | cut -c1-160 | head -90
tar -czf $OUT/calllogs-d.tar.gz -C $OUT calllogs-d; rm -rf $L
echo "total $((SECONDS-T0)) s"
