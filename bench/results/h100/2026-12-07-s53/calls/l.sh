# session 53 call L (build/c61, b32d88d: matmul_rows_mma with inp through a
# per-warp ring in shared memory, W in registers), any card:
# tests (druto detect's self-test, TestGPUConformance with the large cases,
# TestGPUDecode), BenchmarkGPUDecodeOps' products (default against /lt,
# /ksN and /mma), then BenchmarkGPUDecodeGraph with DRUTO_MATMUL_MMA unset,
# =off and =on, alternating, two rounds; on an H200, gpu-bench.sh sample.
T0=$SECONDS
rm -rf build/gpu && tar -xJf build/c61/gpu.tar.xz -C build
L=$OUT/calllogs-l; mkdir -p $L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "# $card, driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)" | tee $L/stamp.txt
{ cat $L/stamp.txt; rm -rf ~/.cache/druto; timeout 100 build/gpu/druto detect > $L/detect.log 2>&1; echo "detect rc=$?"
  grep -E 'matmul_rows_mma|op tests|usable|FAIL' $L/detect.log | head -20
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?"); } > $L/tests.log 2>&1
grep -E 'op tests|usable|^(--- |ok|FAIL|panic)|rc=' $L/tests.log | head -20
echo "after tests $((SECONDS-T0)) s"
(cd pkg/device/gpu && timeout 100 ../../../build/gpu/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|16|64)/(qkv|attn_proj|fc_gelu|fc_proj|head_matmul)(/mma|/lt|/ks4|/ks8)?$' -test.benchtime 100x 2>&1 | grep -E '^Benchmark|FAIL|panic') > $L/ops.log 2>&1
sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//; s/-16 +\t +[0-9]+\t+ +/ /' $L/ops.log | awk '{printf "%s %s | ", $1, $2} END {print ""}' | sed 's/Ops\///g'
echo "after ops $((SECONDS-T0)) s"
for r in 1 2; do for v in mma off on; do
  e=""; [ $v = off ] && e=off; [ $v = on ] && e=on
  echo "## round $r: $v DRUTO_MATMUL_MMA=$e"
  (cd pkg/gpt && DRUTO_MATMUL_MMA=$e timeout 40 ../../build/gpu/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/graph.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//; s/-16 +\t +[0-9]+\t+ +/ /' | cut -c1-70
echo "after graph $((SECONDS-T0)) s"
[ $((SECONDS-T0)) -lt 150 ] && (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 200 ../../../build/gpu/device-gpu.test -test.v -test.run 'TestGPUConformance$' > $L/conformance.log 2>&1; echo "conformance rc=$?")
grep -E 'RESULT conformance Matmul (bf16|f16)' $L/conformance.log | awk '{print $4, $5, $6, $7, $8, $9, $10}' | sort | uniq -c | sort -rn | head -5
grep -cE 'RESULT conformance .* pass false' $L/conformance.log; grep -E '^(--- |ok|FAIL|PASS)' $L/conformance.log | head -5
echo "after conformance $((SECONDS-T0)) s"
if echo "$card" | grep -q H200 && [ $((SECONDS-T0)) -lt 400 ]; then
  bash scripts/gpu-bench.sh sample | tail -3; mv $OUT/logs.tar.gz $OUT/logs-sample.tar.gz
  tar -xzf $OUT/logs-sample.tar.gz -O ./sample.log | grep -vE '^\s*$' | cut -c1-220 | tail -20
fi
tar -czf $OUT/calllogs-l.tar.gz -C $OUT calllogs-l; rm -rf $L
echo "total $((SECONDS-T0)) s on $card"
