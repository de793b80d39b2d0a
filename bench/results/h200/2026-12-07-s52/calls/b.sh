# session 52 call B (build/c55, 3dd27e4), right after call A on the same
# H200: issue 34's must-show, scripts/gpu-bench.sh sample (druto bench
# --sample at B1 and B64 with torch_sample_bench.py beside it, the
# sampler running ahead).
T0=$SECONDS
[ -x build/gpu/druto ] || { rm -rf build/gpu && tar -xJf build/c55/gpu.tar.xz -C build; }
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
echo "# $card; $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"
bash scripts/gpu-bench.sh sample | tail -3; mv $OUT/logs.tar.gz $OUT/logs-sample.tar.gz
tar -xzf $OUT/logs-sample.tar.gz -O ./sample.log | grep -vE '^\s*$' | cut -c1-220 | tail -30
echo "total $((SECONDS-T0)) s on $card"
