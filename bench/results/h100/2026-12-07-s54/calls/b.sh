# session 54 call B (build/c66: decode_token with its trace), any card:
# TestGPUDecodeTokenTrace (the chain's phases at gpt2-124M), then
# TestGPUDecodeToken; build/sync/sync with LL links (value and round in one
# 8-byte store, polled by the readers); BenchmarkGPUDecodeGraph/B1 off/on.
T0=$SECONDS
rm -rf build/gpu && tar -xJf build/c66/gpu.tar.xz -C build
L=$OUT/calllogs-b; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "# $card, driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)" | tee $L/stamp.txt
timeout 60 build/sync/sync > $L/sync.log 2>&1; echo "sync rc=$?"; grep -E 'LL|all arrive  |pdl=1' $L/sync.log
(cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecodeTokenTrace$'; echo "trace rc=$?") > $L/trace.log 2>&1
grep -vE '^=== ' $L/trace.log | sed 's/^ *decode_token_gpu_test.go:[0-9]*: //' | head -30
(cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 100 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecodeToken$'; echo "token rc=$?") > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=' $L/tests.log | head

echo "total $((SECONDS-T0)) s on $card"
for r in 1 2; do for v in off on; do
  echo "## round $r: DRUTO_DECODE_TOKEN=$v"
  (cd pkg/gpt && DRUTO_DECODE_TOKEN=$v timeout 60 ../../build/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph/B1$' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic|rror')
done; done 2>&1 | tee $OUT/graph-b.log | cut -c1-160
mv $OUT/graph-b.log $L/; tar -czf $OUT/calllogs-b.tar.gz -C $OUT calllogs-b; rm -rf $L; echo "total $((SECONDS-T0)) s"
