# session 45 call B (issue 38): the fused layernorm-backward cast
# (LayerNormBackwardCastFP8) and the LM head's dx in FP8 (CrossEntropyFP8)
# merged on top of call A's producers; new (de38935) against f7780f0
# (build/gpu/old): their GPU tests, the fused-vs-split benchmark, the
# gpt2-124M step (bf16, fp8, fp8 + head) new and old alternating, the new
# step with DRUTO_GEMM_TUNE=1, PyTorch's eager bf16 step, and a profile
t0=$SECONDS
LEFT=${LEFT:-420}
rm -rf build/gpu && mkdir -p build/gpu && tar -xJf build/c45/b.tar.xz -C build/gpu
L=$OUT/logs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
left() { echo $((LEFT-(SECONDS-t0))); }
{ stampl
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 150 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUCrossEntropyFP8$|TestGPULayerNormBackwardCastFP8$|TestGPUBuildAndCache|TestGPUCrossEntropyTMA'; echo "device new rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUFP8Step$|TestGPUFP8LayerNormBackwardCast$'; echo "gpt fp8 rc=$?"); } > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=' $L/tests.log | tail -30
echo "after tests $((SECONDS-t0)) s"
{ stampl
  (cd pkg/device/gpu && timeout 60 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPULayerNormBackwardCastFP8' -test.benchtime 3x -test.v; echo "lnbwd bench rc=$?")
} > $L/micro.log 2>&1
grep -E 'µs|us/op|rc=' $L/micro.log | sed 's/^ *//' | cut -c1-220 | head -24
echo "after micro $((SECONDS-t0)) s"
{ stampl
  for r in 1 2; do
    for v in new old; do
      b=build/gpu; [ $v = old ] && b=build/gpu/old
      echo "## round $r: $v"
      timeout 60 $b/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph,fused+fp8+graph --steps 30 --warmup 5 --json $L/bench-$v-$r.json; echo "bench rc=$?"
      timeout 40 $b/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/bench-head-$v-$r.json; echo "head rc=$?"
    done
  done
  if [ $(left) -gt 150 ]; then
    echo "## new, DRUTO_GEMM_TUNE=1"
    DRUTO_GEMM_TUNE=1 timeout 60 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph,fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/bench-tune-head.json; echo "tune rc=$?"
  fi
  if [ $(left) -gt 100 ]; then
    MODES=bf16-amp-fusedadam-sdpa timeout 70 python3 build/gpu/anchors/torch_gpt_bench.py gpt2-124M-B16-T1024 > $L/anchor.log 2>&1; echo "anchor rc=$?"; tail -4 $L/anchor.log
  fi
} > $L/stepbench.log 2>&1
grep -E '^## |ms/step|rc=|step_ms' $L/stepbench.log | cut -c1-170
echo "after step bench $((SECONDS-t0)) s"
if [ $(left) -gt 45 ]; then
  timeout 40 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 10 --warmup 3 --profile --json $L/profile-head.json > $L/profile-head.log 2>&1; echo "profile rc=$?"
  grep -E '^\s+(gemm|attention|layernorm|dy|dgelu|gelu|fp8|classifier|optimizer|graph|zero|encoder)' $L/profile-head.log | head -24
fi
tar -czf $OUT/logs.tar.gz -C $OUT logs && rm -rf $L
echo "total $((SECONDS-t0)) s"
