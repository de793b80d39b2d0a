# session 50 call E at 52ff8e5 (old: 371e090), with ~420 s of device time
# left: on an H200, issue 38's must-show alone (scripts/gpu-bench.sh fp8, two
# rounds, PyTorch eager bf16 and fp8_floor.py in the same call), then as
# time allows one round of the sampling kernels against 371e090; on an
# H100, d.sh.
T0=$SECONDS
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case "$card" in *H200*) ;; *) exec bash build/c50/d.sh ;; esac
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c50/gpu.tar.xz -C build && tar -xJf build/c50/old.tar.xz -C build/old
echo "card: $card; revision $(cat build/gpu/REVISION)"
ROUNDS=2 bash scripts/gpu-bench.sh fp8 | tail -8; mv $OUT/logs.tar.gz $OUT/logs-fp8.tar.gz; echo "after fp8 $((SECONDS-T0)) s"
mkdir -p $OUT/ab
for v in new old; do [ $((SECONDS-T0)) -gt 300 ] && break
  b=build/gpu; [ $v = old ] && b=build/old/gpu
  echo "## $v ($(cat $b/REVISION))"
  (cd pkg/device/gpu && timeout 30 ../../../$b/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|64)/head' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic')
  (cd pkg/gpt && timeout 30 ../../$b/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done 2>&1 | tee $OUT/ab/ab.log | sed -E 's/ +[0-9]+ ns\/op//' | cut -c1-200
echo "total $((SECONDS-T0)) s on $card"
