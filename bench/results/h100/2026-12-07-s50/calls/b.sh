# session 50 call B at 371e090: where a decode token's time goes (issue 34).
# BenchmarkGPUDecodeOps at B 1, 16, 64 with attention_decode at 1-16 blocks a
# pair (/xN) and the head's product alone (head_matmul); then Nsight Compute
# (one launch each, serialized: each kernel's own time, DRAM bytes and
# throughput, occupancy) of the head's kernels and attention_decode at B1
# and B64 as the benchmark launches them.
T0=$SECONDS
[ -f build/gpu/REVISION ] && [ "$(cat build/gpu/REVISION)" = "$(tar -xJf build/c50/gpu.tar.xz -O gpu/REVISION)" ] || { rm -rf build/gpu && tar -xJf build/c50/gpu.tar.xz -C build; }
L=$OUT/calllogs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
pack() { tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs; }
stampl | tee $L/stamp.txt
{ stampl; (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?")
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 90 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUPDL|TestGPUDecode'; echo "device-gpu rc=$?"); } > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|    --- ' $L/tests.log | head -20
{ stampl; (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 150 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps' -test.benchtime 50x -test.v 2>&1 | grep -E 'Benchmark|add up|FAIL|panic'); } > $L/decodeops.log 2>&1
grep -E 'attention|head|add up|FAIL|panic' $L/decodeops.log | sed -E 's/ +[0-9]+ ns\/op//' | cut -c1-120
echo "after decodeops $((SECONDS-T0)) s"; pack
M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct
{ stampl
  for sub in B1/head_sample B64/head_sample B1/attention B64/attention B1/qkv B1/fc_proj; do
    [ $((SECONDS-T0)) -gt 420 ] && break
    echo "## ncu $sub"
    (cd pkg/device/gpu && timeout 60 ncu --clock-control none --cache-control none --graph-profiling node \
      --kernel-name regex:'matmul_rows|sample_parts|sample_rows|attention_decode|gemm|nvjet|sm90|cutlass' --launch-skip 2 --launch-count 6 --metrics $M \
      ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench "BenchmarkGPUDecodeOps/$sub\$" -test.benchtime 1x 2>&1 | grep -vE '^==PROF==|^\s*$|^(goos|goarch|pkg|cpu):')
    echo "ncu rc=$?"
  done
} > $L/ncu.log 2>&1
grep -E '^## |^  [a-z_]+.*\(|gpu__time|dram__throughput|dram__bytes_read|grid_size|warps_active' $L/ncu.log | cut -c1-150 | head -120
pack; rm -rf $L
echo "total $((SECONDS-T0)) s"
