#!/usr/bin/env bash
# run.sh: session 33's fourth druto call (fd203cb): the GPU tests of
# package gpu, the kernel table with PyTorch's kernel anchor, and the
# training steps (gpt2-124M, profiles, tiny and small) with PyTorch's step
# anchor beside them.
set -uo pipefail
cd "$(dirname "$0")/../.."
C=build/carry5
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
dx() { if command -v xz >/dev/null; then xz -d -T8 -c "$1"; else python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" "$1"; fi; }
rm -rf build/gpu; mkdir -p build/gpu && dx $C/gpu.tar.xz | tar xf - -C build/gpu
W=$(mktemp -d)
OUT=$W/t BINS="device-gpu" TESTS='^TestGPU(LayerNorm|StreamRows|GraphBitIdentical|Core|PDL|BuildAndCache|Conformance)' TEST_SHARDS=2 timeout 170 scripts/gpu-bench.sh tests > $W/gpu-bench.out 2>&1
OUT=$W/k KOPS= timeout 200 scripts/gpu-bench.sh kernels >> $W/gpu-bench.out 2>&1
OUT=$W/b BIG_MODES=fused+bf16,fused+bf16+graph,fused+fp16+graph timeout 215 scripts/gpu-bench.sh bench >> $W/gpu-bench.out 2>&1
tar czf $OUT/call4.tar.gz -C $W .
for d in t k b; do (cd $W/$d && [ -f logs.tar.gz ] && tar xzf logs.tar.gz); done
cat $W/t/tests.log | head -20
grep -E "layernorm|residual|adamw|crossentropy|gelu_bias|cast|gradnorm" $W/k/kernels.log | grep -E "stream|fused " | head -40
grep -E "tokens/s|tok/s|peak|GiB|503|torch" $W/b/bench.log | head -40
