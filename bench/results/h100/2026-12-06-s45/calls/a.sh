# session 45 call A (issue 38): the reworked FP8 producers (cast-transposes
# looping over row tiles with the next tile's loads in flight, the GELU in
# the ex2/rcp form, the layernorms' q stored from the row pass, PDL) against
# f7780f0 (build/gpu/old): the FP8 GPU tests, the producers' launch-shape
# sweep, the cast-transpose benchmark old and new, then the gpt2-124M step
# (bf16, fp8, fp8 + head) new and old alternating, and a profile of the new
# fp8 + head step
t0=$SECONDS
LEFT=${LEFT:-420}
rm -rf build/gpu && mkdir -p build/gpu && tar -xJf build/c45/a.tar.xz -C build/gpu
mkdir -p $OUT
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
{ stampl
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 100 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPU.*FP8|TestGPUConformance/.*FP8'; echo "device fp8 rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUFP8'; echo "gpt fp8 rc=$?"); } > $OUT/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=' $OUT/tests.log | tail -30
echo "after tests $((SECONDS-t0)) s"
{ stampl
  (cd pkg/device/gpu && timeout 100 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUFP8Producers' -test.benchtime 1x -test.v; echo "producers rc=$?")
  for v in new old; do
    b=build/gpu; [ $v = old ] && b=build/gpu/old
    echo "## $v: BenchmarkGPUCastTransposeFP8"
    (cd pkg/device/gpu && timeout 40 ../../../$b/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUCastTransposeFP8' -test.benchtime 3x)
  done
} > $OUT/producers.log 2>&1
grep -E 'µs|rc=|^## ' $OUT/producers.log | sed 's/^ *//' | cut -c1-200 | head -70
echo "after producers $((SECONDS-t0)) s"
{ stampl
  for r in 1 2; do
    for v in new old; do
      b=build/gpu; [ $v = old ] && b=build/gpu/old
      echo "## round $r: $v"
      timeout 60 $b/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph,fused+fp8+graph --steps 30 --warmup 5 --json $OUT/bench-$v-$r.json; echo "bench rc=$?"
      timeout 40 $b/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $OUT/bench-head-$v-$r.json; echo "head rc=$?"
    done
  done
} > $OUT/stepbench.log 2>&1
grep -E '^## |ms/step|rc=' $OUT/stepbench.log | cut -c1-150
echo "after step bench $((SECONDS-t0)) s"
if [ $((LEFT-(SECONDS-t0))) -gt 70 ]; then
  timeout 60 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 10 --warmup 3 --profile --json $OUT/profile-head.json > $OUT/profile-head.log 2>&1; echo "profile rc=$?"
  grep -E '^\s+(gemm|attention|layernorm|dy|dgelu|gelu|fp8|classifier|optimizer|graph)' $OUT/profile-head.log | head -24
fi
echo "total $((SECONDS-t0)) s"
