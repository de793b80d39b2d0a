# session 51 call C (new: a pair's only attention_decode block writes its
# output without a partial and merge, and "/pfall" (attPFAll) has a block
# prefetch all its splits into L2 at its start, not the first alone; old:
# 6e3a234): druto detect's self-test and
# TestGPUDecode on the new binary, then BenchmarkGPUDecodeOps' attention
# (B1, B16, B64; "/pfall": every split prefetched) and
# BenchmarkGPUDecodeGraph (a token, B1 and B64), new and old alternating,
# two rounds. Runs on whichever card comes.
T0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c54/gpu.tar.xz -C build && tar -xJf build/c54/old.tar.xz -C build/old
L=$OUT/calllogs-c; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))" | tee $L/stamp.txt
{ cat $L/stamp.txt; rm -rf ~/.cache/druto; timeout 100 build/gpu/druto detect 2>&1 | grep -E 'attention_decode|op tests|step checks|pass  loss|gpu usable'; echo "detect rc=$?"
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?"); } > $L/tests.log 2>&1
grep -E 'op tests|^(--- |ok|FAIL|panic)|rc=' $L/tests.log
echo "after tests $((SECONDS-T0)) s"
for r in 1 2; do for v in new old; do [ $((SECONDS-T0)) -gt 360 ] && break
  b=build/gpu; [ $v = old ] && b=build/old/gpu
  echo "## round $r: $v ($(cat $b/REVISION))"
  (cd pkg/device/gpu && timeout 60 ../../../$b/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|16|64)/attention' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic')
  (cd pkg/gpt && timeout 40 ../../$b/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/bench.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//; s/-16 +\t +[0-9]+\t+ +/ /' | cut -c1-150
# Then, while the call has time: Nsight Compute on attention_decode at B64
# (the new binary; then /pfall), its warps' stall reasons
# and memory workload.
for sub in 'B64/attention$' 'B64/attention/pfall'; do [ $((SECONDS-T0)) -gt 440 ] && break
  echo "## ncu $sub"
  (cd pkg/device/gpu && timeout 60 ncu --clock-control none --cache-control none --graph-profiling node \
    --kernel-name regex:attention_decode --launch-skip 2 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section Occupancy ../../../build/gpu/device-gpu.test -test.run '^$' \
    -test.bench "BenchmarkGPUDecodeOps/$sub" -test.benchtime 1x 2>&1 | grep -vE '^==PROF==|^\s*$|^(goos|goarch|pkg|cpu):')
done > $L/ncu.log 2>&1
grep -E '^## |Duration|DRAM Throughput|Memory Throughput|Stall|Warp Cycles Per Issued|Achieved Occupancy|L2 Hit' $L/ncu.log | cut -c1-150 | head -40
tar -czf $OUT/calllogs-c.tar.gz -C $OUT calllogs-c; rm -rf $L
echo "total $((SECONDS-T0)) s"
