#!/usr/bin/env bash
# gpu-bench.sh: run on the GPU machine (no Go there) after
# `scripts/gpu-build.sh ./pkg/device/gpu` on the development machine, with
# build/gpu carried over. Writes at most 8 files into $OUT (default
# ./out-gpu), most important first, so that a run cut short still returns
# what it finished:
#   env.log        device, driver, date, revision; detect cold and cached
#   detect.json    druto detect --json
#   bench-gpt2-124M.json, bench-tiny-small.json, bench.log
#                  training steps of every mode against the baseline
#   train.log      300 tiny steps in bf16 on the GPU, druto eval of the
#                  checkpoint and the same eval by transformers' GPT2LMHeadModel
#   tests.log      GPU tests (TESTS picks them) and the kernel micro-benchmarks
#   kernels-h200.json  the micro-benchmarks as a bench report
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out-gpu}
mkdir -p "$OUT"
B=build/gpu
export DRUTO_REQUIRE_GPU=1 NCCL_NVLS_ENABLE=0
{
  echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat $B/REVISION)"
  rm -rf ~/.cache/druto
  /usr/bin/time -f "detect cold (kernels compiled by NVRTC): %e s" $B/druto detect --json > "$OUT/detect.json"
  /usr/bin/time -f "detect cached: %e s" $B/druto detect
} > "$OUT/env.log" 2>&1

modes=decomposed+fp32,fused+fp32,decomposed+bf16,fused+bf16,fused+fp16,fused+bf16+device,fused+bf16+graph,fused+fp16+graph
$B/druto bench --backend gpu --configs gpt2-124M:16x1024 --modes "$modes" --steps 20 --warmup 5 \
  --json "$OUT/bench-gpt2-124M.json" >> "$OUT/bench.log" 2>&1 || echo "bench gpt2-124M failed: $?" >> "$OUT/bench.log"
$B/druto bench --backend gpu --configs tiny:8x128,small:32x256 --modes "$modes" --steps 20 --warmup 5 \
  --json "$OUT/bench-tiny-small.json" >> "$OUT/bench.log" 2>&1 || echo "bench tiny/small failed: $?" >> "$OUT/bench.log"

run=$(mktemp -d)
{
  $B/druto train --backend gpu --preset tiny --steps 300 --amp bf16 --out "$run"
  $B/druto eval --backend gpu --checkpoint "$run/model.safetensors" --data scripts/README.md --batch 4 --seq 128
  python3 scripts/torch_eval.py --backend transformers --checkpoint "$run/model.safetensors" --data scripts/README.md --batch 4 --seq 128
  tail -n 3 "$run/metrics.jsonl"
} > "$OUT/train.log" 2>&1

{
  timeout 120 $B/device-gpu.test -test.v -test.run "${TESTS:-TestGPU}"; echo "tests rc=$?"
  timeout 90 $B/druto bench --backend gpu --kernels --json "$OUT/kernels-h200.json"; echo "kernels rc=$?"
} > "$OUT/tests.log" 2>&1
echo "done $(date -u +%FT%TZ)" >> "$OUT/env.log"
