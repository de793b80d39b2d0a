# session 48 call B (issue 38) at e6cf5c5 (old: 018a187): AdamWStateFP8's
# kernel by rows and pipelined, the classifier's merge without contraction:
# their GPU tests (the classifier also at session 47's failing seed), the
# FP8 step; the FP8 step of the new binary against the old alternating with
# a bf16 step a round, the new profile, ncu of adamw_fp8_e4m3; on an H200
# scripts/gpu-bench.sh fp8 (the must-show).
t0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c48/gpu.tar.xz -C build && tar -xJf build/c48/old.tar.xz -C build/old
L=$OUT/calllogs; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))"; }
pack() { tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs; }
stampl | tee $L/stamp.txt
{ stampl
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 90 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPU(AdamWStateFP8|CrossEntropyFP8|CrossEntropy)$|TestLaunch(AdamWStateFP8|CrossEntropyFP8)$'; echo "device rc=$?")
  (cd pkg/device/gpu && DRUTO_SEED=1796573417388075733 DRUTO_REQUIRE_GPU=1 timeout 40 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUCrossEntropyFP8$'; echo "device seed rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 40 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUFP8Step$'; echo "gpt rc=$?")
} > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|    --- FAIL|differs' $L/tests.log | head -30
echo "after tests $((SECONDS-t0)) s"; pack
{ stampl
  for r in 1 2; do
    for v in new old; do
      b=build/gpu/druto; [ $v = old ] && b=build/old/gpu/druto
      echo "## round $r: $v fused+fp8+graph --fp8-head"
      timeout 40 $b bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/fp8head-$v-$r.json 2>&1 | grep -E 'fused|error'
    done
    echo "## round $r: bf16"
    timeout 40 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph --steps 30 --warmup 5 --json $L/bf16-$r.json 2>&1 | grep -E 'fused|error'
  done
} > $L/bench.log 2>&1
grep -E '##|ms/step' $L/bench.log | cut -c1-120
echo "after bench $((SECONDS-t0)) s"; pack
{ stampl; timeout 45 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 10 --warmup 3 --profile --json $L/profile-fp8.json; echo "profile rc=$?"; } > $L/profile.log 2>&1
grep -E 'optimizer|fp8 scales|cast|rc=' $L/profile.log | cut -c1-140 | head
{ stampl; timeout 60 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --kernel-name regex:'adamw_fp8_e4m3|adamw_fused_state2' --launch-skip 0 --launch-count 2 \
     build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8 --fp8-head --steps 1 --warmup 1 2>&1 | grep -vE '^==PROF==|^\s*$'; echo "ncu rc=$?"; } > $L/ncu.log 2>&1
grep -E 'adamw|Duration|DRAM Throughput|Memory Throughput|rc=' $L/ncu.log | head -12
echo "after ncu $((SECONDS-t0)) s"; pack
case "$card" in *H200*) ROUNDS=2 bash scripts/gpu-bench.sh fp8; cat $OUT/fp8-summary.txt ;; esac
pack; rm -rf $L
echo "total $((SECONDS-t0)) s on $card"
