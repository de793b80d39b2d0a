# session 53 call G (build/c58: new = matmul_split, the split-K product
# kernel on thread block clusters; old = bd767cc's binary), any card,
# about 5 minutes: the kernel's first run on a GPU. Tests (druto detect's
# self-test, the Matmul conformance cases small and large, TestGPUDecode),
# then BenchmarkGPUDecodeOps' products (default against the /split or
# /nosplit variant), then BenchmarkGPUDecodeGraph, new binary with
# DRUTO_MATMUL_SPLIT unset, =off and =on, and the old binary, alternating,
# two rounds; on an H200, scripts/gpu-bench.sh sample last.
T0=$SECONDS
rm -rf build/gpu build/old && mkdir -p build/old && tar -xJf build/c58/gpu.tar.xz -C build && tar -xJf build/c58/old.tar.xz -C build/old
L=$OUT/calllogs-g; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "# $card, driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION) (old $(cat build/old/gpu/REVISION))" | tee $L/stamp.txt
{ cat $L/stamp.txt; rm -rf ~/.cache/druto; timeout 100 build/gpu/druto detect > $L/detect.log 2>&1; echo "detect rc=$?"
  grep -E 'matmul_split|op tests|step checks|gpu usable|FAIL|fail' $L/detect.log | head -40
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 150 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUConformance/Matmul_' 2>&1 | grep -E '^(--- |ok|FAIL|panic)|^    --- FAIL' | grep -vE '^    --- PASS' | head -40; echo "conformance rc=$?")
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?"); } > $L/tests.log 2>&1
grep -E 'op tests|usable|^(--- |ok|FAIL|panic)|rc=' $L/tests.log | head -30
echo "after tests $((SECONDS-T0)) s"
(cd pkg/device/gpu && timeout 120 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|16|64)/(qkv|attn_proj|fc_gelu|fc_proj|head_matmul)' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic') > $L/ops.log 2>&1
sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//; s/-16 +\t +[0-9]+\t+ +/ /' $L/ops.log | cut -c1-120
echo "after ops $((SECONDS-T0)) s"
for r in 1 2; do for v in split off on old; do [ $((SECONDS-T0)) -gt 330 ] && break
  b=build/gpu; [ $v = old ] && b=build/old/gpu
  e=""; [ $v = off ] && e=off; [ $v = on ] && e=on
  echo "## round $r: $v ($(cat $b/REVISION)) DRUTO_MATMUL_SPLIT=$e"
  (cd pkg/gpt && DRUTO_MATMUL_SPLIT=$e timeout 40 ../../$b/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/graph.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//; s/-16 +\t +[0-9]+\t+ +/ /' | cut -c1-160
echo "after graph $((SECONDS-T0)) s"
if echo "$card" | grep -q H200 && [ $((SECONDS-T0)) -lt 380 ]; then
  bash scripts/gpu-bench.sh sample | tail -3; mv $OUT/logs.tar.gz $OUT/logs-sample.tar.gz
  tar -xzf $OUT/logs-sample.tar.gz -O ./sample.log | grep -vE '^\s*$' | cut -c1-220 | tail -20
fi
tar -czf $OUT/calllogs-g.tar.gz -C $OUT calllogs-g; rm -rf $L
echo "total $((SECONDS-T0)) s on $card"
