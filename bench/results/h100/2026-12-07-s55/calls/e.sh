# session 55 call E, any card: dec_attend_rows at every X (build/c71,
# e756361) against db5352f (build/c69): druto detect's self-test (the
# attention_decode cases in f32, bf16 and f16) and TestGPUDecode of the new
# binary, then BenchmarkGPUDecodeOps attention at B1, B16 and B64 and
# BenchmarkGPUDecodeGraph, new and old alternating, two rounds.
T0=$SECONDS
for c in c69 c71; do mkdir -p build/$c/x && tar -xJf build/$c/gpu.tar.xz -C build/$c/x; done
L=$OUT/calllogs-e; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); new $(cat build/c71/x/gpu/REVISION), old $(cat build/c69/x/gpu/REVISION)" | tee $L/stamp.txt
N=$PWD/build/c71/x/gpu; O=$PWD/build/c69/x/gpu
timeout 120 $N/druto detect > $L/detect.log 2>&1; echo "detect rc=$?"
grep -E 'attention_decode|usable|op tests|failed' $L/detect.log | cut -c1-160 | head -12
(cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 $N/gpt.test -test.v -test.run 'TestGPUDecode$' 2>&1 | grep -E '^(--- |ok|FAIL|PASS|panic)'; echo "gpt rc=$?") | tee $L/tests.log
echo "after tests $((SECONDS-T0)) s"
for r in 1 2; do for v in new:$N old:$O; do
  echo "## round $r: ${v%%:*}"
  (cd pkg/device/gpu && timeout 60 ${v#*:}/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|16|64)/attention$' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic')
  (cd pkg/gpt && timeout 60 ${v#*:}/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/bench.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//; s/-16 *\t *[0-9]+\t\t */ /' | grep -vE '/x(2|8)' | cut -c1-150
tar -czf $OUT/calllogs-e.tar.gz -C $OUT calllogs-e; rm -rf $L
echo "total $((SECONDS-T0)) s"
