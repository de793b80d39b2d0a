# session 52 call C (build/c55, 3dd27e4), after call B on the same H200:
# issue 38's 2,000-step loss check, druto train --amp bf16 against --amp
# fp8 --fp8-head on one token shard from seed 1 (as run, one line).
[ -x build/gpu/druto ] || { rm -rf build/gpu && tar -xJf build/c55/gpu.tar.xz -C build; }; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; cat build/gpu/REVISION; FP8CURVE_AMPS="bf16 fp8head" bash scripts/gpu-bench.sh fp8curve | tail -3; cat $OUT/logs/fp8curve-summary.txt 2>/dev/null || tar -xzf $OUT/logs.tar.gz -O ./fp8curve-summary.txt; tar -xzf $OUT/logs.tar.gz -O ./fp8curve.log | grep -vE '^\s*$' | cut -c1-200 | tail -25
