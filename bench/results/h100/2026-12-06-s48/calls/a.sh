# session 48 call A (issue 38) at 5145e8f (old: 018a187): the GPU tests of
# AdamWStateFP8 (the optimizer writing the weights' FP8 copies), the record
# lists of FP8ScaleUpdate, the casts under tile_t_store and the classifier's
# ce_target_grad (also at session 47's failing seed), the FP8 step; then
# scripts/gpu-bench.sh fp8 (the must-show), then the FP8 step of the old
# binary against the new alternating.
t0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c48/gpu.tar.xz -C build && tar -xJf build/c48/old.tar.xz -C build/old
L=$OUT/calllogs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))"; }
pack() { tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs; }
stampl | tee $L/stamp.txt
{ stampl
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 120 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPU(AdamWStateFP8|FP8ScaleUpdate|CastTransposeFP8|GELUCastTransposeFP8|CastTransposeDBiasFP8|TransposeFP8|CrossEntropyFP8)$|TestLaunch(TransposeFP8|CrossEntropyFP8|AdamWStateFP8)$'; echo "device rc=$?")
  (cd pkg/device/gpu && DRUTO_SEED=1796573417388075733 DRUTO_REQUIRE_GPU=1 timeout 40 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUCrossEntropyFP8$'; echo "device seed rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUFP8Step$|TestGPUHeadChunked'; echo "gpt rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|    --- FAIL' $L/tests.log | head -40
echo "after tests $((SECONDS-t0)) s"; pack
ROUNDS=2 bash scripts/gpu-bench.sh fp8
cat $OUT/fp8-summary.txt
echo "after fp8 $((SECONDS-t0)) s"
{ stampl
  for r in 1 2; do
    for v in new old; do
      b=build/gpu/druto; [ $v = old ] && b=build/old/gpu/druto
      echo "## round $r: $v fused+fp8+graph --fp8-head"
      timeout 40 $b bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/fp8head-$v-$r.json 2>&1 | grep -E 'fused|error'
    done
  done
} > $L/oldnew.log 2>&1
grep -E '##|fused' $L/oldnew.log | cut -c1-150
pack; rm -rf $L
echo "total $((SECONDS-t0)) s on $(nvidia-smi --query-gpu=name --format=csv,noheader)"
