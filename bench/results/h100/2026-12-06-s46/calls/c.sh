# session 46 call C (issue 38): the LM head's FP8 weight gradient with the
# transposed e5m2 gradient from a separate byte transpose (TransposeFP8),
# against the bf16 weight gradient, same binary: the GPU tests, the step two
# rounds alternating, and the profile of each
t0=$SECONDS
rm -rf build/gpu && mkdir -p build && tar -xJf build/c46/gpu.tar.xz -C build
L=$OUT/calllogs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
stampl | tee $L/stamp.txt
{ stampl
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 60 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUTransposeFP8|TestLaunchTransposeFP8'; echo "device rc=$?")
  (cd pkg/gpt && DRUTO_FP8_HEAD_DW=fp8 DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUFP8Step$|TestGPUHeadChunked'; echo "gpt rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=' $L/tests.log | head -20
echo "after tests $((SECONDS-t0)) s"
{ stampl
  for r in 1 2; do
    for dw in bf16 fp8; do
      echo "## round $r: dW $dw"
      DRUTO_FP8_HEAD_DW=$dw timeout 35 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/head-$dw-$r.json; echo "rc=$?"
    done
  done
  DRUTO_FP8_HEAD_DW=fp8 timeout 40 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 10 --warmup 3 --profile --json $L/profile-fp8.json; echo "profile rc=$?"
} > $L/bench.log 2>&1
grep -E '^## |ms/step|rc=|^\s+(classifier|gemm lm|fp8 transpose)' $L/bench.log | cut -c1-130
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs && rm -rf $L
echo "total $((SECONDS-t0)) s"
