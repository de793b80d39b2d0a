# session 56 call B, any card: the revision to land, build/c75 = 81be068
# (the fused row ops reverted, dec_attend_rows at every X back, SampleHead's
# fp32 floor), against build/c74 = eb2b8df (gpt.test only).
# 1. druto detect and TestGPUDecode of c75.
# 2. BenchmarkGPUDecodeGraph, c75 / c74 alternating, two rounds.
# 3. scripts/gpu-bench.sh sample with c75 (PyTorch's sample bench beside it).
T0=$SECONDS
for c in c75 c74; do mkdir -p build/$c/x && tar -xJf build/$c/gpu.tar.xz -C build/$c/x; done
rm -rf build/gpu && cp -r build/c75/x/gpu build/gpu
L=$OUT/calllogs-b; mkdir -p $L
N=$PWD/build/c75/x/gpu; O=$PWD/build/c74/x/gpu
pack() { tar -czf $OUT/calllogs-b.tar.gz -C $OUT calllogs-b; }
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); new $(cat $N/REVISION), old $(cat $O/REVISION)" | tee $L/stamp.txt
timeout 120 $N/druto detect > $L/detect.log 2>&1; echo "detect rc=$?"
grep -iE 'usable|decode|fail|mismatch|op tests' $L/detect.log | cut -c1-200 | head -8
(cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 $N/gpt.test -test.v -test.run 'TestGPUDecode$' 2>&1 | grep -E '^(--- |ok|FAIL|PASS|panic)'; echo "gpt rc=$?") | tee $L/tests.log
pack
for r in 1 2; do for v in new:$N old:$O; do
  echo "## round $r: ${v%%:*}"
  (cd pkg/gpt && timeout 60 ${v#*:}/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/graph.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//' | cut -c1-170
pack; echo "after graph $((SECONDS-T0)) s"
OUT=$OUT/bench timeout $((420 - (SECONDS-T0))) scripts/gpu-bench.sh sample 2>&1 | tail -3
grep -E 'tokens/s|fused' $OUT/bench/*.log 2>/dev/null | head
echo "total $((SECONDS-T0)) s"
