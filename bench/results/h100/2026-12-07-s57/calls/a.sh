# session 57 call A, any card: build/c77 = cf6bfb9 (matmul_mma: the decode
# step's linear layers at 9 to 64 rows on the tensor cores; attention_decode
# prefetching the next step's rows into L2), build/c76 = 010c6e5 (matmul_mma
# only).
# 1. druto detect; TestGPUMatmulMMA (the Matmul cases of 9 to 64 rows, with
#    and without matmul_mma, against the CPU); TestGPUDecode.
# 2. BenchmarkGPUDecodeOps at B16 and B64: the four products, matmul_mma
#    against cuBLASLt (/lt), two rounds.
#    BenchmarkGPUDecodeOps attention at B1, B16, B64: c77 / c76 alternating.
# 3. BenchmarkGPUDecodeGraph: c77 with DRUTO_MATMUL_MMA on, off, then c76 on;
#    two rounds.
# 4. druto bench --sample B64 bf16 with DRUTO_MATMUL_MMA on / off alternating,
#    then scripts/gpu-bench.sh sample (PyTorch's sample bench beside it).
T0=$SECONDS
for c in c77 c76; do mkdir -p build/$c/x && tar -xJf build/$c/gpu.tar.xz -C build/$c/x; done
c=c77; O=$PWD/build/c76/x/gpu
rm -rf build/gpu && cp -r build/$c/x/gpu build/gpu
L=$OUT/calllogs-a; mkdir -p $L
N=$PWD/build/$c/x/gpu
pack() { tar -czf $OUT/calllogs-a.tar.gz -C $OUT calllogs-a; }
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); new $(cat $N/REVISION), old $(cat $O/REVISION)" | tee $L/stamp.txt
timeout 120 $N/druto detect > $L/detect.log 2>&1; echo "detect rc=$?"
grep -iE 'usable|decode|fail|mismatch|op tests|matmul_mma' $L/detect.log | cut -c1-200 | head -10
(cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 120 $N/device-gpu.test -test.v -test.run 'TestGPUMatmulMMA$' > $L/mma-test.log 2>&1; echo "mma test rc=$?")
grep -E '^(--- |ok|FAIL|PASS|panic)|RESULT' $L/mma-test.log | cut -c1-190 | head -40
(cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 90 $N/gpt.test -test.v -test.run 'TestGPUDecode$' 2>&1 | grep -E '^(--- |ok|FAIL|PASS|panic)'; echo "gpt rc=$?") | tee $L/tests.log
pack; echo "after tests $((SECONDS-T0)) s"
for r in 1 2; do
  (cd pkg/device/gpu && timeout 90 $N/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(16|64)/(qkv|attn_proj|fc_gelu|fc_proj)' -test.benchtime 200x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done 2>&1 | tee $L/ops.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecodeOps//' | cut -c1-120
for r in 1 2; do for v in new:$N old:$O; do
  echo "## attention round $r: ${v%%:*}"
  (cd pkg/device/gpu && timeout 60 ${v#*:}/device-gpu.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeOps/B(1|16|64)/attention$' -test.benchtime 200x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/attention.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecodeOps//' | cut -c1-120
pack; echo "after ops $((SECONDS-T0)) s"
for r in 1 2; do for v in new:on:$N new:off:$N old:on:$O; do
  b=${v##*:}; m=${v#*:}; m=${m%%:*}
  echo "## round $r: ${v%%:*} DRUTO_MATMUL_MMA=$m"
  (cd pkg/gpt && DRUTO_MATMUL_MMA=$m timeout 60 $b/gpt.test -test.run '^$' -test.bench 'BenchmarkGPUDecodeGraph' -test.benchtime 128x 2>&1 | grep -E '^Benchmark|FAIL|panic')
done; done 2>&1 | tee $L/graph.log | sed -E 's/ +[0-9]+ ns\/op//; s/BenchmarkGPUDecode//' | cut -c1-170
pack; echo "after graph $((SECONDS-T0)) s"
ck=/tmp/s57-ck
timeout 120 $N/druto train --preset gpt2-124M --steps 1 --batch 1 --seq 16 --eval-every 0 --sample-tokens 1 --out $ck --backend gpu >/dev/null 2>&1 || echo "checkpoint failed"
for r in 1 2; do for v in on off; do
  echo "## bench --sample round $r: DRUTO_MATMUL_MMA=$v"
  DRUTO_MATMUL_MMA=$v timeout 60 $N/druto bench --sample --backend gpu --checkpoint "$ck/model.safetensors" --configs gpt2-124M:64x16 \
    --modes fused+bf16 --tokens 256 2>&1 | grep -vE '^\s*$' | tail -4
done; done 2>&1 | tee $L/sample-ab.log
pack; echo "after sample A/B $((SECONDS-T0)) s"
OUT=$OUT/bench timeout $((480 - (SECONDS-T0))) scripts/gpu-bench.sh sample 2>&1 | tail -3
pack
echo "total $((SECONDS-T0)) s"
