# session 49 call A at 73f69a8: on an H200 issue 38's must-show (gpu-bench.sh fp8)
# and the sample section; on any card, where a decode token's time goes
# (ncu of every kernel of the B1 decode graph, durations, DRAM bytes).
t0=$SECONDS
rm -rf build/gpu && tar -xJf build/c49/gpu.tar.xz -C build
L=$OUT/calllogs; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
pack() { tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs; }
stampl | tee $L/stamp.txt
case "$card" in *H200*) ROUNDS=2 bash scripts/gpu-bench.sh fp8; cat $OUT/fp8-summary.txt; cp $OUT/logs.tar.gz $OUT/logs-fp8.tar.gz; echo "after fp8 $((SECONDS-t0)) s" ;; esac
{ stampl
  timeout 60 build/gpu/druto bench --sample --backend gpu --configs gpt2-124M:1x16,gpt2-124M:64x16 --modes fused+bf16 --tokens 256 --json $L/sample.json
} > $L/sample.log 2>&1
grep -iE 'tok|error' $L/sample.log | head
{ stampl
  timeout 200 ncu --clock-control none --cache-control none --graph-profiling node --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    --launch-skip 0 --launch-count 420 build/gpu/druto bench --sample --backend gpu --configs gpt2-124M:1x16 --modes fused+bf16 --tokens 8 2>&1 | grep -vE '^==PROF==|^\s*$'
  echo "ncu rc=$?"
} > $L/ncu.log 2>&1
tail -5 $L/ncu.log
echo "after ncu $((SECONDS-t0)) s"; pack
case "$card" in *H200*) bash scripts/gpu-bench.sh sample; cp $OUT/logs.tar.gz $OUT/logs-sample.tar.gz 2>/dev/null ;; esac
pack; rm -rf $L
echo "total $((SECONDS-t0)) s on $card"
