# session 56 call A, any card. Binaries built on the development machine:
#   build/c72 = ab08c25 (the fused row ops: LayerNormMatmul, MatmulResidual),
#   build/c73 = 6bca259 (that, plus dec_attend_rows at every X: 49580cb again),
#   build/c74 = eb2b8df (main before this session; gpt.test only).
# Most needed first (the device time left may cut the call short):
# 1. druto detect of c72 (the self-test: every small conformance case, the
#    new ops' among them), TestGPUDecode of c72.
# 2. BenchmarkGPUDecodeGraph, c72 / c73 / c74 alternating, two rounds.
# 3. druto detect and TestGPUDecode of c73 (attention_decode at every X).
# 4. BenchmarkGPUDecodeOps of c72 (B1, B16; the fused ops beside the old).
# 5. scripts/gpu-bench.sh sample with c72 (PyTorch's sample bench beside it).
T0=$SECONDS
for c in c72 c73 c74; do mkdir -p build/$c/x && tar -xJf build/$c/gpu.tar.xz -C build/$c/x; done
rm -rf build/gpu && cp -r build/c72/x/gpu build/gpu
L=$OUT/calllogs-a; mkdir -p $L
N=$PWD/build/c72/x/gpu; X=$PWD/build/c73/x/gpu; O=$PWD/build/c74/x/gpu
pack() { tar -czf $OUT/calllogs-a.tar.gz -C $OUT calllogs-a; }
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); new $(cat $N/REVISION), everyx $(cat $X/REVISION), old $(cat $O/REVISION)" | tee $L/stamp.txt
check() { # name dir
  timeout 120 $2/druto detect > $L/detect-$1.log 2>&1; echo "detect $1 rc=$?"
  grep -iE 'usable|decode|fail|mismatch' $L/detect-$1.log | cut -c1-200 | head -8
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 $2/gpt.test -test.v -test.run 'TestGPUDecode$' 2>&1 | grep -E '^(--- |ok|FAIL|PASS|panic)'; echo "gpt $1 rc=$?") | tee -a $L/tests.log
}
check new $N; pack
echo "after new checks $((SECONDS-T0)) s"
for r in 1 2; do for v in new:$N old:$O everyx:$X; do
  echo "## round $r: ${v%%:*}"
  (cd pkg/gpt && timeout 60 ${v#*:}/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/graph.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//' | cut -c1-170
pack; echo "after graph $((SECONDS-T0)) s"
check everyx $X; pack
(cd pkg/device/gpu && timeout 100 $N/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|16)/' -test.benchtime 50x 2>&1 | grep -vE '/x(2|4|8|16)' ) > $L/ops.log 2>&1
grep -E '^Benchmark|add up|FAIL|panic' $L/ops.log | sed -E 's/ +[0-9]+ ns\/op//' | cut -c1-120
pack; echo "after ops $((SECONDS-T0)) s"
OUT=$OUT/bench timeout $((590 - (SECONDS-T0))) scripts/gpu-bench.sh sample 2>&1 | tail -5
ls $OUT/bench 2>/dev/null
echo "total $((SECONDS-T0)) s"
