# session 46 call A: the decode step's blocks as one kernel (decode_layer),
# matmul_rows_tc at 9-64 rows, the LM head's dW in FP8: GPU tests, then
# decode and FP8-step benchmarks with their in-binary baselines
t0=$SECONDS
LEFT=${LEFT:-540}
rm -rf build/gpu && mkdir -p build && tar -xJf build/c46/gpu.tar.xz -C build
L=$OUT/calllogs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
left() { echo $((LEFT-(SECONDS-t0))); }
stampl | tee $L/stamp.txt
{ stampl
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 170 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUConformance/(DecodeBlock|Matmul_|CrossEntropyFP8|AttentionDecode)|TestGPUMatmulTC|TestGPUCrossEntropyFP8|TestLaunchCrossEntropyFP8'; echo "device rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 120 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$|TestGPUFP8Step$|TestGPUHeadChunked'; echo "gpt rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|    --- FAIL' $L/tests.log | head -40
echo "after tests $((SECONDS-t0)) s"
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs
{ stampl
  for r in 1 2; do
    for v in default blockoff tcoff; do
      [ $(left) -lt 200 ] && break
      e=""; [ $v = blockoff ] && e="DRUTO_DECODE_BLOCK=off"; [ $v = tcoff ] && e="DRUTO_MATMUL_TC=off"
      echo "## round $r: $v"
      (cd pkg/gpt && env $e timeout 60 ../../build/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x -test.v 2>&1 | grep -E 'Benchmark|one by one|FAIL|panic')
    done
  done
} > $L/decodegraph.log 2>&1
grep -E '^## |Benchmark|one by one|FAIL|panic' $L/decodegraph.log | cut -c1-220
echo "after decode graph $((SECONDS-t0)) s"
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs
{ stampl
  for r in 1 2; do
    [ $(left) -lt 120 ] && break
    echo "## round $r"
    timeout 45 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph,fused+fp8+graph --steps 30 --warmup 5 --json $L/fp8-$r.json; echo "bench rc=$?"
    timeout 35 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/fp8head-$r.json; echo "head rc=$?"
    DRUTO_FP8_HEAD_DW=bf16 timeout 35 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/fp8headbf16dw-$r.json; echo "head bf16dw rc=$?"
  done
  [ $(left) -gt 60 ] && { MODES=bf16-amp-fusedadam-sdpa timeout 55 python3 build/gpu/anchors/torch_gpt_bench.py gpt2-124M-B16-T1024 > $L/anchor.log 2>&1; echo "anchor rc=$?"; tail -2 $L/anchor.log; }
} > $L/fp8.log 2>&1
grep -E '^## |ms/step|rc=|bf16-amp' $L/fp8.log | cut -c1-180
echo "after fp8 $((SECONDS-t0)) s"
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs
if [ $(left) -gt 50 ]; then
  (cd pkg/device/gpu && timeout $(( $(left)-15 )) ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|64)/' -test.benchtime 100x 2>&1 | grep -E 'Benchmark' ) > $L/decodeops.log 2>&1
  grep -cE Benchmark $L/decodeops.log
fi
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs
rm -rf $L
echo "total $((SECONDS-t0)) s"
