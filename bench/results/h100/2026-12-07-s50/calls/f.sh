# session 50 call F at aff56b8 (kernels as cd9675b) (old: 52ff8e5): sample_rows back to reading
# its parts in place (sample_parts' batched scan kept): druto detect's
# self-test, TestGPUDecode, then the head op and the decode graph against
# 52ff8e5, one round each.
T0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c50/gpu.tar.xz -C build && tar -xJf build/c50/old.tar.xz -C build/old
L=$OUT/calllogs-f; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))" | tee $L/stamp.txt
{ cat $L/stamp.txt; rm -rf ~/.cache/druto; timeout 100 build/gpu/druto detect 2>&1 | grep -E 'sample|op tests|step checks|pass  loss|gpu usable'; echo "detect rc=$?"
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?"); } > $L/tests.log 2>&1
grep -E 'op tests|^(--- |ok|FAIL|panic)|rc=' $L/tests.log
for v in new old; do [ $((SECONDS-T0)) -gt 110 ] && break
  b=build/gpu; [ $v = old ] && b=build/old/gpu
  echo "## $v ($(cat $b/REVISION))"
  (cd pkg/device/gpu && timeout 30 ../../../$b/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|64)/head_sample' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic')
  (cd pkg/gpt && timeout 30 ../../$b/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph/B1' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done 2>&1 | tee $L/bench.log | sed -E 's/ +[0-9]+ ns\/op//' | cut -c1-200
tar -czf $OUT/calllogs-f.tar.gz -C $OUT calllogs-f; rm -rf $L
echo "total $((SECONDS-T0)) s"
