# session 46 call B: why the new paths are slower. decode_layer's B1 token
# at 3, 2 and 1 blocks an SM against the ops one by one; ncu of
# decode_layer (B1) and of matmul_rows_tc (B64 qkv); the FP8 step's profile
# with the LM head's dW in FP8 and in bf16; on an H200 also the step
# benchmark with PyTorch's eager step (issue 38's must-show)
t0=$SECONDS
LEFT=${LEFT:-470}
rm -rf build/gpu && mkdir -p build && tar -xJf build/c46/gpu.tar.xz -C build
L=$OUT/calllogs; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
left() { echo $((LEFT-(SECONDS-t0))); }
stampl | tee $L/stamp.txt
{ stampl
  for r in 1 2; do
    for v in off 3 2 1; do
      echo "## round $r: blocks $v"
      if [ $v = off ]; then e="DRUTO_DECODE_BLOCK=off"; else e="DRUTO_DECODE_BLOCK=on DRUTO_DECODE_BLOCK_PER_SM=$v"; fi
      (cd pkg/gpt && env $e timeout 40 ../../build/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph/B1$' -test.benchtime 128x -test.v 2>&1 | grep -E 'Benchmark.*-16|one by one|FAIL|panic')
    done
  done
} > $L/decodeblocks.log 2>&1
grep -E '^## |Benchmark|FAIL|panic' $L/decodeblocks.log | sed 's/ns\/op.*graph-tok\/s/…/' | cut -c1-160
echo "after decode blocks $((SECONDS-t0)) s"
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs
NCU="ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section SchedulerStats"
{ stampl
  echo "## ncu decode_layer (B1, gpt2-124M bf16)"
  (cd pkg/gpt && DRUTO_DECODE_BLOCK=on timeout 90 $NCU --kernel-name regex:'^decode_layer$' --launch-skip 24 --launch-count 2 ../../build/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph/B1$' -test.benchtime 4x 2>&1 | grep -vE '^==PROF==|^\s*$'; echo "ncu rc=$?")
  echo "## ncu matmul_rows_tc and cuBLASLt (B64 qkv)"
  (cd pkg/device/gpu && DRUTO_MATMUL_TC=on timeout 90 $NCU --kernel-name regex:'matmul_rows_tc|sm90|gemm|Kernel' --launch-skip 4 --launch-count 3 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B64/qkv(/lt)?-' -test.benchtime 6x 2>&1 | grep -vE '^==PROF==|^\s*$'; echo "ncu rc=$?")
} > $L/ncu.log 2>&1
grep -E '^## |Duration|Registers|Achieved Occupancy|Memory Throughput|DRAM Throughput|Stall|ncu rc|  [a-z_0-9]+.*\(' $L/ncu.log | cut -c1-150 | head -40
echo "after ncu $((SECONDS-t0)) s"
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs
if [ $(left) -gt 90 ]; then
  { stampl
    for dw in bf16 fp8; do
      echo "## profile fp8 head, dW $dw"
      DRUTO_FP8_HEAD_DW=$dw timeout 40 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 10 --warmup 3 --profile --json $L/profile-head-$dw.json; echo "profile rc=$?"
    done
  } > $L/profile.log 2>&1
  grep -E '^## |^\s+(gemm|attention|layernorm|dy|dgelu|gelu|fp8|classifier|cross|optimizer)|rc=' $L/profile.log | cut -c1-140 | head -50
fi
echo "after profile $((SECONDS-t0)) s"
case "$card" in *H200*)
  if [ $(left) -gt 100 ]; then
  { stampl
    timeout 45 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph,fused+fp8+graph --steps 30 --warmup 5 --json $L/h200-fp8.json; echo "bench rc=$?"
    timeout 35 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/h200-fp8head.json; echo "head rc=$?"
    MODES=bf16-amp-fusedadam-sdpa timeout 55 python3 build/gpu/anchors/torch_gpt_bench.py gpt2-124M-B16-T1024 > $L/anchor.log 2>&1; echo "anchor rc=$?"; tail -2 $L/anchor.log
  } > $L/h200.log 2>&1
  grep -E 'ms/step|rc=|bf16-amp' $L/h200.log | cut -c1-150
  fi ;;
esac
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs
rm -rf $L
echo "total $((SECONDS-t0)) s on $card"
