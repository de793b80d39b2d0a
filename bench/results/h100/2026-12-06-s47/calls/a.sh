# session 47 call A (issue 38): ncu of the FP8 step's memory-bound producers
# (why they run at 65-80% of copy); the 2,000-step loss curve with the LM
# head's weight gradient in FP8 (DRUTO_FP8_HEAD_DW=fp8); on an H200 the
# must-show step benchmark with PyTorch's eager step in the same call.
t0=$SECONDS
LEFT=${LEFT:-560}
rm -rf build/gpu && mkdir -p build && tar -xJf build/c47/gpu.tar.xz -C build
L=$OUT/calllogs; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
left() { echo $((LEFT-(SECONDS-t0))); }
stampl | tee $L/stamp.txt
pack() { tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs; }
NCU="ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section SchedulerStats"
{ stampl
  echo "## ncu of the FP8 producers in one fp8 step (--fp8-head, dW fp8), not a graph"
  DRUTO_FP8_HEAD_DW=fp8 timeout 170 $NCU --kernel-name regex:'cast_transpose|layernorm_fp8|layernorm_backward_cast|transpose_fp8|crossentropy_fp8' --launch-count 130 \
     build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8 --fp8-head --steps 1 --warmup 1 2>&1 | grep -vE '^==PROF==|^\s*$'; echo "ncu rc=$?"
} > $L/ncu.log 2>&1
grep -cE '^  [a-z_0-9]+.*\(' $L/ncu.log; tail -3 $L/ncu.log
echo "after ncu $((SECONDS-t0)) s"; pack
amps=fp8head; case "$card" in *H200*) amps="bf16 fp8head";; esac
bf=bench/results/h100/2026-12-06-s43/fp8/fp8curve-bf16.jsonl
[ "$amps" != fp8head ] && bf=
mkdir -p $L/curve
OUT=$L/curve FP8CURVE_AMPS="$amps" FP8CURVE_BF16=$bf DRUTO_FP8_HEAD_DW=fp8 FP8CURVE_TIMEOUT=180 scripts/gpu-bench.sh fp8curve > $L/curve/run.log 2>&1
cat $L/curve/fp8curve-summary.txt 2>/dev/null | head -30; ls $L/curve
echo "after curve $((SECONDS-t0)) s"; pack
case "$card" in *H200*)
  if [ $(left) -gt 110 ]; then
  { stampl
    for r in 1 2; do
      echo "## round $r"
      timeout 35 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+bf16+graph --steps 30 --warmup 5 --json $L/h200-bf16-$r.json; echo "bf16 rc=$?"
      DRUTO_FP8_HEAD_DW=fp8 timeout 35 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 30 --warmup 5 --json $L/h200-fp8head-$r.json; echo "head rc=$?"
    done
    MODES=bf16-amp-fusedadam-sdpa timeout 55 python3 build/gpu/anchors/torch_gpt_bench.py gpt2-124M-B16-T1024 > $L/anchor.log 2>&1; echo "anchor rc=$?"; tail -2 $L/anchor.log
  } > $L/h200.log 2>&1
  grep -E 'ms/step|rc=|bf16-amp|fused' $L/h200.log | cut -c1-150
  fi ;;
esac
pack
rm -rf $L
echo "total $((SECONDS-t0)) s on $card"
