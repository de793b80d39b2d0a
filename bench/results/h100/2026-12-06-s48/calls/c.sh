# session 48 call C (issue 38) at 2d90b46: on an H200 the must-show,
# scripts/gpu-bench.sh fp8 (bf16 and fp8 --fp8-head graph steps alternating,
# both profiles, PyTorch's eager bf16 step, fp8_floor.py); on any card then
# fp8curve while the call's time allows: 2,000 steps of gpt2-124M bf16 and
# fp8 --fp8-head on one shard (the FP8 weights' copies now written by the
# optimizer, AdamWStateFP8). Call B measured the H100's step already.
t0=$SECONDS
LEFT=${LEFT:-380}
rm -rf build/gpu && mkdir -p build && tar -xJf build/c48/gpu.tar.xz -C build
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "# $card, $(nvidia-smi --query-gpu=driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"
case "$card" in *H200*)
  ROUNDS=2 bash scripts/gpu-bench.sh fp8
  mv $OUT/logs.tar.gz $OUT/fp8-logs.tar.gz
  cat $OUT/fp8-summary.txt
  echo "after fp8 $((SECONDS-t0)) s" ;;
esac
left=$((LEFT-(SECONDS-t0)))
if [ $left -gt 240 ]; then
  FP8CURVE_AMPS="bf16 fp8head" FP8CURVE_TIMEOUT=$(( (left-40)/2 )) bash scripts/gpu-bench.sh fp8curve
  tar -xzOf $OUT/logs.tar.gz --wildcards "*fp8curve-summary.txt" 2>/dev/null || cat $OUT/fp8curve-summary.txt
else
  echo "fp8curve skipped: $left s left"
fi
echo "total $((SECONDS-t0)) s on $card"
