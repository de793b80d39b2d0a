# session 45 call C (issue 38): layernorm_backward_cast_e5m2 at 32 rows a
# block (75fcedb) against 64 (de38935, build/gpu/prev): its tests and
# benchmark, the gpt2-124M step (bf16, fp8, fp8 + head) new and prev
# alternating, PyTorch's eager bf16 step, then 2,000 steps of druto train
# --amp fp8 --fp8-head (the head's dx now in FP8) against session 43's
# bf16 curve on the same shard and seed
t0=$SECONDS
LEFT=${LEFT:-420}
rm -rf build/gpu && mkdir -p build/gpu && tar -xJf build/c45/c.tar.xz -C build/gpu
L=$OUT/calllogs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
left() { echo $((LEFT-(SECONDS-t0))); }
{ stampl
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 90 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPULayerNormBackwardCastFP8$'; echo "device rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUFP8Step$|TestGPUFP8LayerNormBackwardCast$'; echo "gpt fp8 rc=$?")
  (cd pkg/device/gpu && timeout 40 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPULayerNormBackwardCastFP8' -test.benchtime 3x -test.v; echo "lnbwd bench rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|16384,768' $L/tests.log | tail -14
echo "after tests $((SECONDS-t0)) s"
{ stampl
  for r in 1 2; do
    echo "## round $r: new"
    timeout 60 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph,fused+fp8+graph --steps 30 --warmup 5 --json $L/bench-new-$r.json; echo "bench rc=$?"
    timeout 40 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/bench-head-new-$r.json; echo "head rc=$?"
    echo "## round $r: prev"
    timeout 40 build/gpu/prev/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/bench-head-prev-$r.json; echo "head rc=$?"
  done
  MODES=bf16-amp-fusedadam-sdpa timeout 70 python3 build/gpu/anchors/torch_gpt_bench.py gpt2-124M-B16-T1024 > $L/anchor.log 2>&1; echo "anchor rc=$?"; tail -2 $L/anchor.log
} > $L/stepbench.log 2>&1
grep -E '^## |ms/step|rc=|bf16-amp' $L/stepbench.log | cut -c1-150
echo "after step bench $((SECONDS-t0)) s"
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs
if [ $(left) -gt 150 ]; then
  STEPS=2000 FP8CURVE_AMPS=fp8head FP8CURVE_BF16=$PWD/bench/results/h100/2026-12-06-s43/fp8/fp8curve-bf16.jsonl FP8CURVE_TIMEOUT=$(( $(left)-45 < 170 ? $(left)-45 : 170 )) scripts/gpu-bench.sh fp8curve 2>&1 | tail -3
  cat $OUT/fp8curve-summary.txt 2>/dev/null | cut -c1-400
fi
rm -rf $L
echo "total $((SECONDS-t0)) s"
