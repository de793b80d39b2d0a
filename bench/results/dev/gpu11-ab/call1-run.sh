#!/usr/bin/env bash
# run.sh PART: session 32's GPU calls. part 1: A/B of layernorm variants
# (A = build/gpu/druto, F G H K L in build/carry) + their tests + detect and
# the landed state's GPU tests; part 2: kernels + gpt2-124M with anchors.
set -uo pipefail
cd "$(dirname "$0")/../.."
C=build/carry
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
dx() { if command -v xz >/dev/null; then xz -d -T8 -c "$1"; else python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" "$1"; fi; }
if [ ! -x build/gpu/druto ]; then mkdir -p build/gpu && dx $C/gpu.tar.xz | tar xf - -C build/gpu; fi
for f in $C/*.xz; do b=${f%.xz}; [ "$f" = $C/gpu.tar.xz ] && continue; [ -x "$b" ] || { dx "$f" > "$b"; chmod +x "$b"; }; done
cp build/gpu/druto $C/druto-A
W=$(mktemp -d)
if [ "${1:-1}" = 1 ]; then
  L=$W/ab.log
  { nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; date -u; echo "A = $(cat build/gpu/REVISION)"; } > $L
  OPS=copy,layernorm_fwd,residual_layernorm_fwd,layernorm_bwd
  run() { echo "## round $1 variant $2 $(date -u +%T)"; DRUTO_SELFTEST=report timeout 90 $C/druto-$2 bench --backend gpu --kernels --ops $OPS --json $W/k-$1-$2.json 2>&1 | grep -v cuBLASLt; echo "rc=$?"; }
  for v in A F G H K L; do run 1 $v; done >> $L 2>&1
  for v in L K H G F A; do run 2 $v; done >> $L 2>&1
  { for v in K L; do echo "## tests $v $(date -u +%T)"; (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 100 ../../$C/device-gpu-$v.test -test.v -test.count=1 -test.run 'TestGPULayerNormBackwardTMA|TestGPUBuildAndCache') 2>&1 | grep -E '^(--- |ok|FAIL|PASS)|local|tma_test' | head -30; done; } > $W/vtests.log 2>&1
  OUT=$W/main BINS="device-gpu" TESTS='^TestGPU(LayerNorm|Conformance|BuildAndCache|StreamRows|GraphBitIdentical|Core|PDL)' TEST_SHARDS=3 scripts/gpu-bench.sh detect tests > $W/gpu-bench.out 2>&1
else
  OUT=$W/main KOPS= BENCH_QUICK=1 BIG_MODES=fused+bf16,fused+bf16+graph,fused+fp16+graph scripts/gpu-bench.sh kernels bench > $W/gpu-bench.out 2>&1
fi
tar czf $OUT/part${1:-1}.tar.gz -C $W .
echo "== summary"; grep -E 'stream |rc=' $W/ab.log 2>/dev/null | sed 's/  */ /g' | head -80; cat $W/vtests.log 2>/dev/null; tail -5 $W/gpu-bench.out
