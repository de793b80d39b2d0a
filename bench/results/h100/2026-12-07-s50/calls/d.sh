# session 50 call D at 52ff8e5 (old: 371e090): sample_parts' batched scan and
# sample_rows' parts in shared memory. druto detect (its self-test runs the
# SampleHead conformance cases), TestGPUDecode; then BenchmarkGPUDecodeOps'
# head (head_sample, head_matmul) and BenchmarkGPUDecodeGraph, new and old
# alternating, two rounds; ncu of the two sampling kernels at B1 and B64.
T0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c50/gpu.tar.xz -C build && tar -xJf build/c50/old.tar.xz -C build/old
L=$OUT/calllogs-d; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))"; }
pack() { tar -czf $OUT/calllogs-d.tar.gz -C $OUT calllogs-d; }
stampl | tee $L/stamp.txt
{ stampl; rm -rf ~/.cache/druto; timeout 120 build/gpu/druto detect 2>&1 | tail -25; echo "detect rc=$?"
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?"); } > $L/tests.log 2>&1
grep -iE 'usable|sample|^(--- |ok|FAIL|panic)|rc=|    --- ' $L/tests.log | head -20
echo "after tests $((SECONDS-T0)) s"; pack
{ stampl
  for r in 1 2; do
    for v in new old; do [ $((SECONDS-T0)) -gt 170 ] && break
      b=build/gpu; [ $v = old ] && b=build/old/gpu
      echo "## round $r: $v"
      (cd pkg/device/gpu && timeout 60 ../../../$b/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|64)/head' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic')
      (cd pkg/gpt && timeout 60 ../../$b/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
    done
  done
} > $L/bench.log 2>&1
grep -E '^## |Benchmark|FAIL|panic' $L/bench.log | sed -E 's/ +[0-9]+ ns\/op//' | cut -c1-200
echo "after bench $((SECONDS-T0)) s"; pack
if [ $((SECONDS-T0)) -lt 200 ]; then { stampl
  for sub in B1/head_sample B64/head_sample; do for v in new old; do
    b=build/gpu; [ $v = old ] && b=build/old/gpu
    echo "## ncu $sub $v"
    (cd pkg/device/gpu && timeout 50 ncu --clock-control none --cache-control none --graph-profiling node --kernel-name regex:'sample_parts|sample_rows' --launch-skip 2 --launch-count 4 \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__grid_size,launch__registers_per_thread \
      ../../../$b/device-gpu.test -test.run '^$' -test.bench "BenchmarkGPUDecodeOps/$sub\$" -test.benchtime 1x 2>&1 | grep -E '^  [a-z_]+ \(|gpu__time|registers')
  done; done; } > $L/ncu.log 2>&1
  cat $L/ncu.log | cut -c1-120 | head -60
fi
pack; rm -rf $L
echo "total $((SECONDS-T0)) s"
