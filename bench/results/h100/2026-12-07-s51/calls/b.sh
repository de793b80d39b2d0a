# session 51 call B (new: attention_decode appends the row's key and value
# itself, kv_append no longer in a decode step; old: aff56b8): druto
# detect's self-test and TestGPUDecode on the new binary, then
# BenchmarkGPUDecodeOps (the layer's ops at B1 and B64) and
# BenchmarkGPUDecodeGraph (a token, B1 and B64), new and old alternating,
# two rounds. Runs on whichever card comes (H100 or H200).
T0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c51/gpu.tar.xz -C build && tar -xJf build/c51/old.tar.xz -C build/old
L=$OUT/calllogs-b; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))" | tee $L/stamp.txt
{ cat $L/stamp.txt; rm -rf ~/.cache/druto; timeout 100 build/gpu/druto detect 2>&1 | grep -E 'sample|op tests|step checks|pass  loss|gpu usable'; echo "detect rc=$?"
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 120 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUConformance$' 2>&1 | grep -E 'Decode|^(--- |ok|FAIL|PASS|panic)' | grep -vE '^\s+--- PASS' | tail -20; echo "conformance rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?"); } > $L/tests.log 2>&1
grep -E 'op tests|^(--- |ok|FAIL|panic)|rc=' $L/tests.log
echo "after tests $((SECONDS-T0)) s"
for r in 1 2; do for v in new old; do [ $((SECONDS-T0)) -gt 420 ] && break
  b=build/gpu; [ $v = old ] && b=build/old/gpu
  echo "## round $r: $v ($(cat $b/REVISION))"
  (cd pkg/device/gpu && timeout 60 ../../../$b/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|64)/(qkv|kv_append|attention)$' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic')
  (cd pkg/gpt && timeout 40 ../../$b/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/bench.log | sed -E 's/ +[0-9]+ ns\/op//' | cut -c1-200
tar -czf $OUT/calllogs-b.tar.gz -C $OUT calllogs-b; rm -rf $L
echo "total $((SECONDS-T0)) s"
