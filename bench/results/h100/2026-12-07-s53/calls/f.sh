# session 52 call F2 (build/c57: new = bd767cc, attention_decode without the
# pfs argument; old = 3dd27e4), any card, inside 150 s: the decode
# self-test (druto detect's attention_decode cases) and TestGPUDecode on
# the new binary, then BenchmarkGPUDecodeOps' attention at B1 and B64 and
# BenchmarkGPUDecodeGraph, new and old alternating, while time is left.
T0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c57/gpu.tar.xz -C build && tar -xJf build/c57/old.tar.xz -C build/old
L=$OUT/calllogs-f; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))" | tee $L/stamp.txt
{ cat $L/stamp.txt; rm -rf ~/.cache/druto; timeout 100 build/gpu/druto detect 2>&1 | grep -E 'attention_decode|op tests|step checks|gpu usable'; echo "detect rc=$?"
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 40 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?"); } > $L/tests.log 2>&1
grep -E 'op tests|^(--- |ok|FAIL|panic)|rc=' $L/tests.log
echo "after tests $((SECONDS-T0)) s"
for r in 1 2; do for v in new old; do [ $((SECONDS-T0)) -gt 110 ] && break
  b=build/gpu; [ $v = old ] && b=build/old/gpu
  echo "## round $r: $v ($(cat $b/REVISION))"
  (cd pkg/device/gpu && timeout 20 ../../../$b/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|64)/attention$' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic')
  (cd pkg/gpt && timeout 30 ../../$b/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/bench.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//; s/-16 +\t +[0-9]+\t+ +/ /' | cut -c1-200
tar -czf $OUT/calllogs-f.tar.gz -C $OUT calllogs-f; rm -rf $L
echo "total $((SECONDS-T0)) s"
