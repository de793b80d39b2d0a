# session 48 call D (issue 38): the GPU tests of current scaling
# (TestGPUFP8CurrentScaling), the FP8 step and the optimizer's FP8 copies
# after the recipe's Current field replaced Delayed, then one FP8 and one
# bf16 graph step of gpt2-124M.
t0=$SECONDS
rm -rf build/gpu && mkdir -p build && tar -xJf build/c48/gpu.tar.xz -C build
L=$OUT/calllogs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
stampl | tee $L/stamp.txt
{ stampl
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUFP8CurrentScaling$|TestGPUFP8Step$'; echo "gpt rc=$?")
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 40 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPU(AdamWStateFP8|FP8ScaleUpdate)$'; echo "device rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|    --- FAIL|loss under' $L/tests.log | head -20
echo "after tests $((SECONDS-t0)) s"
{ stampl
  for m in "fused+fp8+graph --fp8-head" "fused+bf16+graph"; do
    timeout 40 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes $m --steps 30 --warmup 5 2>&1 | grep -E 'ms/step|error'
  done
} > $L/bench.log 2>&1
cut -c1-120 $L/bench.log
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs; rm -rf $L
echo "total $((SECONDS-t0)) s on $(nvidia-smi --query-gpu=name --format=csv,noheader)"
