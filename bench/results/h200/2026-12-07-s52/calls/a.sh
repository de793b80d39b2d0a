# session 52 call A (build/c55: new = 3dd27e4, generation running ahead;
# old = 6e3a234), any card: the decode self-test (druto detect's
# attention_decode and sampling cases), TestGPUDecode, TestGPUFetch; on an
# H200, issue 38's must-show (ROUNDS=2 scripts/gpu-bench.sh fp8, PyTorch's
# eager bf16 step and fp8_floor.py in the same call); then
# BenchmarkGPUDecodeOps' attention at B1 and B64 (with "/pfall") and
# BenchmarkGPUDecodeGraph (next, graph and ahead µs a token), new and old
# alternating, two rounds, inside 540 s in all.
T0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c55/gpu.tar.xz -C build && tar -xJf build/c55/old.tar.xz -C build/old
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
L=$OUT/calllogs-a; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))" | tee $L/stamp.txt
{ cat $L/stamp.txt; rm -rf ~/.cache/druto; timeout 100 build/gpu/druto detect 2>&1 | grep -E 'attention_decode|sample|op tests|step checks|pass  loss|gpu usable'; echo "detect rc=$?"
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?")
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 30 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUFetch$'; echo "fetch rc=$?"); } > $L/tests.log 2>&1
grep -E 'op tests|^(--- |ok|FAIL|panic)|rc=' $L/tests.log
echo "after tests $((SECONDS-T0)) s"
case "$card" in *H200*) ROUNDS=2 bash scripts/gpu-bench.sh fp8 | tail -8; cp $OUT/logs.tar.gz $OUT/logs-fp8.tar.gz; rm -f $OUT/logs.tar.gz; echo "after fp8 $((SECONDS-T0)) s" ;; esac
for r in 1 2; do for v in new old; do [ $((SECONDS-T0)) -gt 480 ] && break
  b=build/gpu; [ $v = old ] && b=build/old/gpu
  echo "## round $r: $v ($(cat $b/REVISION))"
  (cd pkg/device/gpu && timeout 30 ../../../$b/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|64)/attention' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic' | grep -vE '/x[0-9]')
  (cd pkg/gpt && timeout 40 ../../$b/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/bench.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//; s/-16 +\t +[0-9]+\t+ +/ /' | cut -c1-200
tar -czf $OUT/calllogs-a.tar.gz -C $OUT calllogs-a; rm -rf $L
echo "total $((SECONDS-T0)) s on $card"
