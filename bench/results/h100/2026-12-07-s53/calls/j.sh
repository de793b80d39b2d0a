# session 53 call J (build/c59, 0d91868), any card: where matmul_split's
# warps wait, Nsight Compute's stall reasons and its per-instruction (SASS)
# samples, B64 qkv and B1 qkv/split, each kernel alone.
T0=$SECONDS
[ -x build/gpu/device-gpu.test ] || { rm -rf build/gpu && tar -xJf build/c59/gpu.tar.xz -C build; }
L=$OUT/calllogs-j; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)" | tee $L/stamp.txt
cd pkg/device/gpu
for op in B64/qkv B1/qkv/split; do
  f=$(echo $op | tr / _)
  timeout 100 ncu --clock-control none --graph-profiling node --kernel-name regex:matmul_split --launch-skip 2 --launch-count 1 \
    --section WarpStateStats --section SchedulerStats --metrics regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio \
    ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench "BenchmarkGPUDecodeOps/$op\$" -test.benchtime 1x > $L/stall-$f.log 2>&1
  timeout 100 ncu --clock-control none --graph-profiling node --kernel-name regex:matmul_split --launch-skip 2 --launch-count 1 \
    --section SourceCounters --section WarpStateStats --page source --print-source sass --csv \
    ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench "BenchmarkGPUDecodeOps/$op\$" -test.benchtime 1x > $L/sass-$f.csv 2>&1
  echo "## $op"; grep -E 'stalled' $L/stall-$f.log | sort -k3 -g -r | head -12 | cut -c1-120
done
cd ../../..
tar -czf $OUT/calllogs-j.tar.gz -C $OUT calllogs-j; rm -rf $L
echo "total $((SECONDS-T0)) s"
