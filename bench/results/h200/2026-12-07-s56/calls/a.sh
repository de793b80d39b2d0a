# session 56 call A, any card. Binaries built on the development machine:
#   build/c72 = ab08c25 (the fused row ops: LayerNormMatmul, MatmulResidual),
#   build/c73 = 6bca259 (that, plus dec_attend_rows at every X: 49580cb again),
#   build/c74 = eb2b8df (main before this session; gpt.test only).
# 1. druto detect of c72 and c73 (the self-test: every small conformance case,
#    the new ops' and attention_decode's among them), TestGPUDecode of both.
# 2. BenchmarkGPUDecodeOps of c72 (B1, B16; the fused ops beside the old).
# 3. BenchmarkGPUDecodeGraph, c72 / c73 / c74 alternating, two rounds.
# 4. scripts/gpu-bench.sh sample with c72 (PyTorch's sample bench beside it).
T0=$SECONDS
for c in c72 c73 c74; do mkdir -p build/$c/x && tar -xJf build/$c/gpu.tar.xz -C build/$c/x; done
rm -rf build/gpu && cp -r build/c72/x/gpu build/gpu
L=$OUT/calllogs-a; mkdir -p $L
N=$PWD/build/c72/x/gpu; X=$PWD/build/c73/x/gpu; O=$PWD/build/c74/x/gpu
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); new $(cat $N/REVISION), everyx $(cat $X/REVISION), old $(cat $O/REVISION)" | tee $L/stamp.txt
for v in new:$N everyx:$X; do
  timeout 150 ${v#*:}/druto detect > $L/detect-${v%%:*}.log 2>&1; echo "detect ${v%%:*} rc=$?"
  grep -iE 'usable|decode|fail|mismatch' $L/detect-${v%%:*}.log | cut -c1-200 | head -8
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 ${v#*:}/gpt.test -test.v -test.run 'TestGPUDecode$' 2>&1 | grep -E '^(--- |ok|FAIL|PASS|panic)'; echo "gpt ${v%%:*} rc=$?") | tee -a $L/tests.log
done
echo "after tests $((SECONDS-T0)) s"
(cd pkg/device/gpu && timeout 100 $N/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|16)/' -test.benchtime 50x 2>&1 | grep -vE '/x(2|4|8|16)' ) > $L/ops.log 2>&1
grep -E '^Benchmark|add up|FAIL|panic' $L/ops.log | sed -E 's/ +[0-9]+ ns\/op//' | cut -c1-120
echo "after ops $((SECONDS-T0)) s"
for r in 1 2; do for v in new:$N everyx:$X old:$O; do
  echo "## round $r: ${v%%:*}"
  (cd pkg/gpt && timeout 60 ${v#*:}/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/graph.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//' | cut -c1-150
echo "after graph $((SECONDS-T0)) s"
tar -czf $OUT/calllogs-a.tar.gz -C $OUT calllogs-a; rm -rf $L
OUT=$OUT/bench timeout $((590 - (SECONDS-T0))) scripts/gpu-bench.sh sample 2>&1 | tail -5
ls $OUT/bench 2>/dev/null
echo "total $((SECONDS-T0)) s"
