# session 50 call A at 47e187a (old: 371e090): on an H200, issue 38's must-show
# (scripts/gpu-bench.sh fp8, two rounds, PyTorch eager bf16 and fp8_floor.py
# in the same call), then issue 34's (scripts/gpu-bench.sh sample: druto
# bench --sample with torch_sample_bench.py beside it). On an H100: sample
# and decode only. Then, as time allows, the sampling kernels against the
# old binary (371e090).
T0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c50/gpu.tar.xz -C build && tar -xJf build/c50/old.tar.xz -C build/old
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "card: $card; revision $(cat build/gpu/REVISION)"
case "$card" in *H200*) ROUNDS=2 bash scripts/gpu-bench.sh fp8 | tail -8; cp $OUT/logs.tar.gz $OUT/logs-fp8.tar.gz; echo "after fp8 $((SECONDS-T0)) s" ;; esac
bash scripts/gpu-bench.sh sample | tail -3; cp $OUT/logs.tar.gz $OUT/logs-sample.tar.gz
echo "after sample $((SECONDS-T0)) s"
tar -xzf $OUT/logs-sample.tar.gz -O ./sample.log | grep -vE '^\s*$' | cut -c1-220 | tail -40
rm -f $OUT/logs.tar.gz
# Then, while the call has time: the sampling kernels of this revision
# against 371e090's (BenchmarkGPUDecodeOps' head, the decode graph), new
# and old alternating.
mkdir -p $OUT/ab
for r in 1 2; do for v in new old; do [ $((SECONDS-T0)) -gt 480 ] && break
  b=build/gpu; [ $v = old ] && b=build/old/gpu
  echo "## round $r: $v ($(cat $b/REVISION))"
  (cd pkg/device/gpu && timeout 40 ../../../$b/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|64)/head' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic')
  (cd pkg/gpt && timeout 40 ../../$b/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $OUT/ab/ab.log | sed -E 's/ +[0-9]+ ns\/op//' | cut -c1-200
echo "total $((SECONDS-T0)) s on $card"
