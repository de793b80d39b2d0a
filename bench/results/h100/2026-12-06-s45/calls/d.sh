# session 45 call D (issue 38): the cast-transposes' 16-byte loads of a
# 16-bit T (new) against 39048a5 (build/gpu/prev): the FP8 kernel tests
# (the layernorm-backward cast at call C's failing seed and a fresh one),
# the gpt2-124M step (bf16, fp8, fp8 + head) new and prev alternating,
# PyTorch's eager bf16 step, and 300 steps of druto train --amp fp8
# --fp8-head logging the underflows, the logits' gradient's apart
t0=$SECONDS
LEFT=${LEFT:-420}
rm -rf build/gpu && mkdir -p build/gpu && tar -xJf build/c45/d.tar.xz -C build/gpu
L=$OUT/calllogs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
left() { echo $((LEFT-(SECONDS-t0))); }
{ stampl
  (cd pkg/device/gpu && DRUTO_SEED=1796553188671497742 DRUTO_REQUIRE_GPU=1 timeout 60 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPULayerNormBackwardCastFP8$'; echo "lnbwd seed rc=$?")
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 120 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPULayerNormBackwardCastFP8$|TestGPUCastTransposeFP8|TestGPUGELUCastTransposeFP8|TestGPUCastTransposeDBiasFP8|TestGPUDGELUCastTransposeDBiasFP8'; echo "device rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUFP8Step$'; echo "gpt fp8 rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=' $L/tests.log | tail -14
echo "after tests $((SECONDS-t0)) s"
{ stampl
  for r in 1 2; do
    for v in new prev; do
      b=build/gpu; [ $v = prev ] && b=build/gpu/prev
      echo "## round $r: $v"
      timeout 60 $b/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph,fused+fp8+graph --steps 30 --warmup 5 --json $L/bench-$v-$r.json; echo "bench rc=$?"
      timeout 40 $b/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/bench-head-$v-$r.json; echo "head rc=$?"
    done
  done
  MODES=bf16-amp-fusedadam-sdpa timeout 70 python3 build/gpu/anchors/torch_gpt_bench.py gpt2-124M-B16-T1024 > $L/anchor.log 2>&1; echo "anchor rc=$?"; tail -2 $L/anchor.log
} > $L/stepbench.log 2>&1
grep -E '^## |ms/step|rc=|bf16-amp' $L/stepbench.log | cut -c1-150
echo "after step bench $((SECONDS-t0)) s"
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs
if [ $(left) -gt 100 ]; then
  STEPS=300 EVAL_EVERY=100 FP8CURVE_AMPS=fp8head FP8CURVE_BF16=$PWD/bench/results/h100/2026-12-06-s43/fp8/fp8curve-bf16.jsonl FP8CURVE_TIMEOUT=$(( $(left)-40 < 90 ? $(left)-40 : 90 )) scripts/gpu-bench.sh fp8curve 2>&1 | tail -2
  grep -E 'underflows|logits' $OUT/fp8curve-summary.txt 2>/dev/null | cut -c1-400
fi
rm -rf $L
echo "total $((SECONDS-t0)) s"
