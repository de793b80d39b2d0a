# session 52 call E (build/c56: a10f5fe, the FP8 profile's ceiling measured
# by bench.PeakFP8), any card, inside 250 s: the fp8 step's profile (its
# FP8 GEMM rows against the FP8 peak), then calls/d.sh's batch-64 products
# and, while time is left, their Nsight Compute steps (cuBLASLt first).
T0=$SECONDS
rm -rf build/gpu && tar -xJf build/c56/gpu.tar.xz -C build
L=$OUT/calllogs-e; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)" | tee $L/stamp.txt
timeout 90 build/gpu/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes fused+fp8+graph --fp8-head --steps 10 --warmup 3 --profile \
  --json $L/profile-fp8.json > $L/profile.log 2>&1; echo "profile rc=$?"
grep -E 'FP8 products|peak|gemm' $L/profile.log | cut -c1-160
echo "after profile $((SECONDS-T0)) s"
(cd pkg/device/gpu && timeout 90 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B64/(qkv|attn_proj|fc_gelu|fc_proj)' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic') \
  | tee $L/ops.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecodeOps//; s/-16 +\t +[0-9]+\t+ +/ /' | grep -vE '/ct[0-9]+_kc[0-9]+ ' | cut -c1-120
grep -cE '/ct[0-9]+_kc' $L/ops.log | sed 's/^/tc plans timed: /'
echo "after ops $((SECONDS-T0)) s"
for spec in "lt:qkv" "lt:fc_proj" "tc:qkv" "lt:attn_proj" "tc:fc_proj"; do [ $((SECONDS-T0)) -gt 190 ] && break
  mode=${spec%%:*} op=${spec#*:}
  env=""; [ $mode = tc ] && env="DRUTO_MATMUL_TC=on"
  echo "## ncu $mode B64/$op"
  (cd pkg/device/gpu && env $env timeout 45 ncu --clock-control none --cache-control none --graph-profiling node \
    --launch-skip 1 --launch-count 2 --section SpeedOfLight --section LaunchStats --section Occupancy \
    ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench "BenchmarkGPUDecodeOps/B64/$op\$" -test.benchtime 1x 2>&1 \
    | grep -vE '^==PROF==|^\s*$|^(goos|goarch|pkg|cpu):')
done > $L/ncu.log 2>&1
grep -E '^## |^  [a-zA-Z_0-9]+.*\(|Duration|DRAM Throughput|Grid Size|Registers Per|Achieved Occupancy' $L/ncu.log | cut -c1-150 | head -70
tar -czf $OUT/calllogs-e.tar.gz -C $OUT calllogs-e; rm -rf $L
echo "total $((SECONDS-T0)) s"
