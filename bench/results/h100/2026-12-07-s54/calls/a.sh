# session 54 call A (build/c63, d054d83: decode_token, a decode step's blocks
# for one sequence as one persistent kernel), any card: the cost of a link
# between phases (build/sync/sync: a counter in a persistent kernel against
# a launch in a graph, with and without PDL); TestGPUDecodeToken,
# TestGPUDecode; BenchmarkGPUDecodeGraph/B1 with DRUTO_DECODE_TOKEN off and
# on, alternating, two rounds.
T0=$SECONDS
rm -rf build/gpu && tar -xJf build/c63/gpu.tar.xz -C build
L=$OUT/calllogs-a; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "# $card, driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)" | tee $L/stamp.txt
timeout 60 build/sync/sync > $L/sync.log 2>&1; echo "sync rc=$?"; cat $L/sync.log
echo "after sync $((SECONDS-T0)) s"
{ cat $L/stamp.txt
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 150 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecodeToken$'; echo "token rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "decode rc=$?"); } > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|decode_token|trap|Error|error' $L/tests.log | head -30
echo "after tests $((SECONDS-T0)) s"
for r in 1 2; do for v in off on; do
  echo "## round $r: DRUTO_DECODE_TOKEN=$v"
  (cd pkg/gpt && DRUTO_DECODE_TOKEN=$v timeout 60 ../../build/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph/B1$' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic|rror')
done; done 2>&1 | tee $L/graph.log | cut -c1-160
echo "after graph $((SECONDS-T0)) s"
tar -czf $OUT/calllogs-a.tar.gz -C $OUT calllogs-a; rm -rf $L
echo "total $((SECONDS-T0)) s on $card"
