# session 49 call D at 00b7e18 (old: 73f69a8; call B at 4b0598f: decode_linear illegal address, fixed at 50e8676; attention_decode L2 prefetch): the decode step's block in
# five launches (decode_linear's phases + attention_decode) and the LM head
# on decode_head: GPU tests; BenchmarkGPUDecodeGraph with the blocks on
# (the new default), off, and off with the head on matmul_rows (the old
# path), alternating; druto bench --sample new against old; ncu of the new
# kernels (and GEMM tuning at B64); on an H200 issue 38's fp8 section and issue 34's sample section.
T0=$SECONDS; t0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c49/gpu.tar.xz -C build && tar -xJf build/c49/old.tar.xz -C build/old
L=$OUT/calllogs; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))"; }
pack() { tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs; }
stampl | tee $L/stamp.txt
case "$card" in *H200*) ROUNDS=2 bash scripts/gpu-bench.sh fp8; cat $OUT/fp8-summary.txt; cp $OUT/logs.tar.gz $OUT/logs-fp8.tar.gz; echo "after fp8 $((SECONDS-t0)) s"; t0=$SECONDS ;; esac  # the guards below count from here
{ stampl
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?")
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 60 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUPDL'; echo "pdl rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|    --- ' $L/tests.log | head -20
echo "after tests $((SECONDS-t0)) s"; pack
{ stampl
  for r in 1 2; do
    for v in blocks ops old tune; do [ $((SECONDS-t0)) -gt 200 ] && break
      e=""; [ $v = ops ] && e="DRUTO_DECODE_BLOCK=off"; [ $v = old ] && e="DRUTO_DECODE_BLOCK=off DRUTO_DECODE_HEAD=matmul"; [ $v = tune ] && e="DRUTO_GEMM_TUNE=1"
      echo "## round $r: $v ($e)"
      (cd pkg/gpt && env $e timeout 60 ../../build/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x -test.v 2>&1 | grep -E 'Benchmark|one by one|FAIL|panic')
    done
  done
} > $L/decodegraph.log 2>&1
grep -E '^## |Benchmark|FAIL|panic' $L/decodegraph.log | cut -c1-200
echo "after decode graph $((SECONDS-t0)) s"; pack
{ stampl
  for r in 1 2; do
    for v in new old; do
      b=build/gpu/druto; [ $v = old ] && b=build/old/gpu/druto
      echo "## round $r: $v"
      timeout 60 $b bench --sample --backend gpu --configs gpt2-124M:1x16,gpt2-124M:64x16 --modes fused+bf16 --tokens 256 --json $L/sample-$v-$r.json 2>&1 | grep -vE '^\s*$'
    done
  done
} > $L/sample.log 2>&1
grep -iE '##|tok|error' $L/sample.log | cut -c1-200 | head -30
echo "after sample $((SECONDS-t0)) s"; pack
if [ $((SECONDS-t0)) -lt 170 ]; then
  { stampl; (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 150 ../../../build/gpu/device-gpu.test -test.v -test.short -test.run 'TestGPUConformance$' 2>&1 | grep -E 'DecodeBlock|SampleHead|AttentionDecode|^(--- |ok|FAIL|PASS|panic)|rc='; echo "conformance rc=$?") } > $L/conformance.log 2>&1
  grep -E 'pass false|^(--- |ok|FAIL|panic)|rc=' $L/conformance.log | head
fi
case "$card" in *H200*) [ $((SECONDS-t0)) -lt 250 ] && { bash scripts/gpu-bench.sh sample; cp $OUT/logs.tar.gz $OUT/logs-sample.tar.gz; echo "after sample section $((SECONDS-t0)) s"; } ;; esac
if [ $((SECONDS-t0)) -lt 330 ]; then { stampl
  for e in ""; do echo "## ncu $e"; env $e timeout 70 ncu --clock-control none --cache-control none --graph-profiling node --kernel-name regex:'decode_linear|decode_head|attention_decode|sample_parts|sample_rows|encoder_at|matmul_rows|residual|kv_append' \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    --launch-skip 0 --launch-count 80 build/gpu/druto bench --sample --backend gpu --configs gpt2-124M:1x16 --modes fused+bf16 --tokens 4 2>&1 | grep -vE '^==PROF==|^\s*$'
  echo "ncu rc=$?"; done
} > $L/ncu.log 2>&1; fi
tail -3 $L/ncu.log
echo "after ncu $((SECONDS-t0)) s"; pack
pack; rm -rf $L
echo "total $((SECONDS-T0)) s on $card"
