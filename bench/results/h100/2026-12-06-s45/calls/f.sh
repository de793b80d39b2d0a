# session 45 call F (issue 38): the cast-transposes' rows phase with a
# quarter warp on one 128-byte line (new) against aec2f18 (build/gpu/prev):
# the cast-transpose GPU tests, then the gpt2-124M fp8 and fp8 + head steps,
# new and prev alternating, two rounds
t0=$SECONDS
LEFT=${LEFT:-200}
rm -rf build/gpu && mkdir -p build/gpu && tar -xJf build/c45/f.tar.xz -C build/gpu
L=$OUT/calllogs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
left() { echo $((LEFT-(SECONDS-t0))); }
{ stampl
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 60 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUCastTransposeFP8|TestGPUGELUCastTransposeFP8|TestGPUCastTransposeDBiasFP8|TestGPUDGELUCastTransposeDBiasFP8'; echo "device rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=' $L/tests.log | tail -8
echo "after tests $((SECONDS-t0)) s"
{ stampl
  for r in 1 2; do
    for v in new prev; do
      [ $(left) -lt 30 ] && break
      b=build/gpu; [ $v = prev ] && b=build/gpu/prev
      echo "## round $r: $v"
      timeout 30 $b/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --steps 30 --warmup 5 --json $L/bench-$v-$r.json; echo "bench rc=$?"
      timeout 30 $b/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/bench-head-$v-$r.json; echo "head rc=$?"
    done
  done
} > $L/stepbench.log 2>&1
grep -E '^## |ms/step|rc=' $L/stepbench.log | cut -c1-150
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs && rm -rf $L
echo "total $((SECONDS-t0)) s"
