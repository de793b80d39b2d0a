# session 55 call A, any card: build/sync/sync (counter links against LL
# words against launches); build/c68 (LL links) TestGPUDecodeToken and
# TestGPUDecodeTokenTrace; build/c66 (counter links, the phases' vectors in
# shared memory) TestGPUDecodeTokenTrace; BenchmarkGPUDecodeGraph/B1 with
# the ops one by one (c68, DRUTO_DECODE_TOKEN=off), c68 on and c66 on,
# alternating, two rounds; then BenchmarkGPUDecodeGraph/B64 of c68 with
# DRUTO_GEMM_TUNE 0 and 1 (cuBLASLt's split-K candidates timed), alternating.
T0=$SECONDS
L=$OUT/calllogs-a; mkdir -p $L
for c in c66 c68; do mkdir -p build/$c/x && tar -xJf build/$c/gpu.tar.xz -C build/$c/x; done
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "# $card, driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader); $(date -u +%FT%TZ); c66 $(cat build/c66/x/gpu/REVISION), c68 $(cat build/c68/x/gpu/REVISION)" | tee $L/stamp.txt
timeout 60 build/sync/sync > $L/sync.log 2>&1; echo "sync rc=$?"; grep -E 'LL|all arrive  |pdl=1' $L/sync.log | head -16
for c in c68 c66; do
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/$c/x/gpu/gpt.test -test.v -test.run 'TestGPUDecodeTokenTrace$'; echo "$c trace rc=$?") > $L/trace-$c.log 2>&1
  echo "== $c"; grep -vE '^=== ' $L/trace-$c.log | sed 's/^ *decode_token_gpu_test.go:[0-9]*: //' | head -24
done
(cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 100 ../../build/c68/x/gpu/gpt.test -test.v -test.run 'TestGPUDecodeToken$'; echo "c68 token rc=$?") > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|    decode' $L/tests.log | head
echo "after tests $((SECONDS-T0)) s"
for r in 1 2; do for v in c68:off c68:on c66:on; do
  c=${v%:*}; e=${v#*:}
  echo "## round $r: $c DRUTO_DECODE_TOKEN=$e"
  (cd pkg/gpt && DRUTO_DECODE_TOKEN=$e timeout 60 ../../build/$c/x/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph/B1$' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic|rror')
done; done 2>&1 | tee $L/graph.log | cut -c1-170
for r in 1 2; do for t in 0 1; do
  echo "## round $r: c68 B64 DRUTO_GEMM_TUNE=$t"
  (cd pkg/gpt && DRUTO_GEMM_TUNE=$t timeout 90 ../../build/c68/x/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph/B64$' -test.benchtime 64x 2>&1 | grep -E '^Benchmark|FAIL|panic|rror')
done; done 2>&1 | tee $L/graph64.log | cut -c1-170
tar -czf $OUT/calllogs-a.tar.gz -C $OUT calllogs-a; rm -rf $L
echo "total $((SECONDS-T0)) s on $card"
