# session 47 call B (issue 38): the FP8 casts' transposed stores through
# bytetile.cuh's tile_t_store (and transpose_fp8 on 64x256 tiles): GPU
# tests of every FP8 producer and the step; the step, new binary against
# the old (171a6a4) alternating, two rounds, with a bf16 step a round; the
# new profile; ncu of the producers; on an H200 PyTorch's eager step.
t0=$SECONDS
LEFT=${LEFT:-560}
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c47/gpu.tar.xz -C build && tar -xJf build/c47/old.tar.xz -C build/old
L=$OUT/calllogs; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))"; }
left() { echo $((LEFT-(SECONDS-t0))); }
pack() { tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs; }
stampl | tee $L/stamp.txt
{ stampl
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 150 ../../../build/gpu/device-gpu.test -test.v -test.run 'FP8|TestGPUConformance/.*FP8'; echo "device rc=$?")
  (cd pkg/gpt && DRUTO_FP8_HEAD_DW=fp8 DRUTO_REQUIRE_GPU=1 timeout 90 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUFP8Step$|TestGPUHeadChunked'; echo "gpt rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|    --- FAIL' $L/tests.log | head -50
echo "after tests $((SECONDS-t0)) s"; pack
{ stampl
  for r in 1 2; do
    for v in new old; do
      b=build/gpu/druto; [ $v = old ] && b=build/old/gpu/druto
      echo "## round $r: $v fused+fp8+graph --fp8-head (dW fp8)"
      DRUTO_FP8_HEAD_DW=fp8 timeout 40 $b bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/fp8head-$v-$r.json 2>&1 | grep -E 'fused|error'; echo "rc=$?"
    done
    echo "## round $r: bf16"
    timeout 40 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph --steps 30 --warmup 5 --json $L/bf16-$r.json 2>&1 | grep -E 'fused|error'; echo "rc=$?"
  done
} > $L/bench.log 2>&1
cat $L/bench.log | cut -c1-160
echo "after bench $((SECONDS-t0)) s"; pack
case "$card" in *H200*)
  { stampl; MODES=bf16-amp-fusedadam-sdpa timeout 60 python3 build/gpu/anchors/torch_gpt_bench.py gpt2-124M-B16-T1024; echo "anchor rc=$?"; } > $L/anchor.log 2>&1
  tail -3 $L/anchor.log; pack ;;
esac
if [ $(left) -gt 60 ]; then
  { stampl; DRUTO_FP8_HEAD_DW=fp8 timeout 45 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 10 --warmup 3 --profile --json $L/profile-fp8.json; echo "profile rc=$?"; } > $L/profile.log 2>&1
  grep -E '^\s+(gemm|attention|layernorm|dy|dgelu|gelu|fp8|classifier|optimizer|graph)|rc=' $L/profile.log | cut -c1-140 | head -30
fi
echo "after profile $((SECONDS-t0)) s"; pack
if [ $(left) -gt 100 ]; then
  NCU="ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis"
  { stampl; DRUTO_FP8_HEAD_DW=fp8 timeout $(( $(left)-30 )) $NCU --kernel-name regex:'gelu_cast_transpose|cast_transpose_dbias|layernorm_fp8|layernorm_backward_cast|transpose_fp8' --launch-skip 20 --launch-count 40 \
     build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8 --fp8-head --steps 1 --warmup 1 2>&1 | grep -vE '^==PROF==|^\s*$'; echo "ncu rc=$?"; } > $L/ncu.log 2>&1
  tail -2 $L/ncu.log
fi
pack; rm -rf $L
echo "total $((SECONDS-t0)) s on $card"
