# session 45 call E (issue 38): layernorm_backward_cast_e5m2's rows a
# block by width (aec2f18: 64 up to C = 768, 32 above): its GPU test and
# benchmark, the FP8 step test; on an H200 only, the gpt2-124M step (bf16,
# fp8, fp8 + head) with PyTorch's eager bf16 step in the same call
t0=$SECONDS
LEFT=${LEFT:-240}
rm -rf build/gpu && mkdir -p build/gpu && tar -xJf build/c45/e.tar.xz -C build/gpu
L=$OUT/calllogs; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
left() { echo $((LEFT-(SECONDS-t0))); }
{ stampl
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 60 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPULayerNormBackwardCastFP8$'; echo "device rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUFP8Step$|TestGPUFP8LayerNormBackwardCast$'; echo "gpt fp8 rc=$?")
  (cd pkg/device/gpu && timeout 40 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPULayerNormBackwardCastFP8' -test.benchtime 3x -test.v; echo "lnbwd bench rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|fused' $L/tests.log | sed 's/^ *//' | cut -c1-160 | tail -24
echo "after tests $((SECONDS-t0)) s on $card"
case "$card" in *H200*)
  { stampl
    timeout 60 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph,fused+fp8+graph --steps 30 --warmup 5 --json $L/bench-fp8.json; echo "bench rc=$?"
    timeout 40 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/bench-fp8head.json; echo "head rc=$?"
    MODES=bf16-amp-fusedadam-sdpa timeout 70 python3 build/gpu/anchors/torch_gpt_bench.py gpt2-124M-B16-T1024 > $L/anchor.log 2>&1; echo "anchor rc=$?"; tail -2 $L/anchor.log
  } > $L/fp8bench.log 2>&1
  grep -E 'ms/step|rc=|bf16-amp' $L/fp8bench.log | cut -c1-150 ;;
esac
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs && rm -rf $L
echo "total $((SECONDS-t0)) s"
