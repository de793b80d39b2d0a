# session 49 call E at 5d1cc51 (old: 73f69a8): the decode step as it lands
# (blocks' ops one by one, attention_decode's L2 prefetch before the
# programmatic-launch wait): TestGPUDecode, then BenchmarkGPUDecodeGraph of
# this revision against 73f69a8's, alternating, two rounds.
T0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c49/gpu.tar.xz -C build && tar -xJf build/c49/old.tar.xz -C build/old
L=$OUT/calllogs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))"; }
stampl | tee $L/stamp.txt
{ stampl; (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?"); } > $L/tests.log 2>&1
grep -E '^(--- |ok|FAIL|panic)|rc=|    --- ' $L/tests.log
{ stampl
  for r in 1 2; do
    for v in new old; do
      b=build/gpu/gpt.test; [ $v = old ] && b=build/old/gpu/gpt.test
      echo "## round $r: $v"
      (cd pkg/gpt && timeout 60 ../../$b -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E 'Benchmark|FAIL|panic')
    done
  done
} > $L/decodegraph.log 2>&1
grep -E '^## |Benchmark.*-16|FAIL|panic' $L/decodegraph.log | cut -c1-200
tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs
echo "total $((SECONDS-T0)) s"
