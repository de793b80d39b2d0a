#!/usr/bin/env bash
# run.sh: session 32's second GPU call: A/B of the landed state (N =
# build/gpu/druto) against the previous one (A0 = 4793b80), detect and GPU
# tests of the landed state, the kernel table and gpt2-124M with the
# PyTorch anchors beside them.
set -uo pipefail
cd "$(dirname "$0")/../.."
C=build/carry2
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
dx() { if command -v xz >/dev/null; then xz -d -T8 -c "$1"; else python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" "$1"; fi; }
rm -rf build/gpu; mkdir -p build/gpu && dx $C/gpu.tar.xz | tar xf - -C build/gpu
dx $C/druto-A0.xz > $C/druto-A0; chmod +x $C/druto-A0; cp build/gpu/druto $C/druto-N
W=$(mktemp -d)
L=$W/ab.log
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; date -u; echo "A0 = 4793b80, N = $(cat build/gpu/REVISION)"; } > $L
OPS=copy,layernorm_fwd,residual_layernorm_fwd,layernorm_bwd
run() { echo "## round $1 variant $2 $(date -u +%T)"; DRUTO_SELFTEST=report timeout 90 $C/druto-$2 bench --backend gpu --kernels --ops $OPS --json $W/k-$1-$2.json 2>&1 | grep -v cuBLASLt; echo "rc=$?"; }
{ run 1 A0; run 1 N; run 2 N; run 2 A0; } >> $L 2>&1
OUT=$W/main BINS="device-gpu" TESTS='^TestGPU(LayerNorm|StreamRows|GraphBitIdentical|Core|PDL|BuildAndCache)' TEST_SHARDS=2 scripts/gpu-bench.sh detect tests > $W/gpu-bench.out 2>&1
OUT=$W/main2 KOPS= BENCH_QUICK=1 BIG_MODES=fused+bf16,fused+bf16+graph,fused+fp16+graph scripts/gpu-bench.sh kernels bench >> $W/gpu-bench.out 2>&1
tar czf $OUT/part2.tar.gz -C $W .
echo "== summary"; grep -E '^## round| layernorm.*stream |rc=' $L | sed 's/  */ /g' | head -40; tail -5 $W/gpu-bench.out
