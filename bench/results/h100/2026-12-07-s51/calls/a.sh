# session 51 call A at 97f16e9 (attention_decode with the append, prefetch, direct; decode_linear deleted): on an H200, the
# decode self-test (druto detect's sampling cases, TestGPUDecode), then
# issue 38's must-show (scripts/gpu-bench.sh fp8, two rounds, PyTorch eager
# bf16 and fp8_floor.py in the same call), then issue 34's (scripts/
# gpu-bench.sh sample: druto bench --sample with torch_sample_bench.py
# beside it).
T0=$SECONDS
rm -rf build/gpu && tar -xJf build/c54/gpu.tar.xz -C build
card=$(nvidia-smi --query-gpu=name --format=csv,noheader)
L=$OUT/calllogs-a; mkdir -p $L
echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)" | tee $L/stamp.txt
{ cat $L/stamp.txt; rm -rf ~/.cache/druto; timeout 100 build/gpu/druto detect 2>&1 | grep -E 'sample|op tests|step checks|pass  loss|gpu usable'; echo "detect rc=$?"
  (cd pkg/gpt && DRUTO_REQUIRE_GPU=1 timeout 60 ../../build/gpu/gpt.test -test.v -test.run 'TestGPUDecode$'; echo "gpt rc=$?"); } > $L/tests.log 2>&1
grep -E 'op tests|^(--- |ok|FAIL|panic)|rc=' $L/tests.log
tar -czf $OUT/calllogs-a.tar.gz -C $OUT calllogs-a; rm -rf $L
echo "after tests $((SECONDS-T0)) s"
case "$card" in *H200*) ROUNDS=2 bash scripts/gpu-bench.sh fp8 | tail -8; cp $OUT/logs.tar.gz $OUT/logs-fp8.tar.gz; echo "after fp8 $((SECONDS-T0)) s" ;; esac
bash scripts/gpu-bench.sh sample | tail -3; cp $OUT/logs.tar.gz $OUT/logs-sample.tar.gz
echo "after sample $((SECONDS-T0)) s"
tar -xzf $OUT/logs-sample.tar.gz -O ./sample.log | grep -vE '^\s*$' | cut -c1-220 | tail -30
rm -f $OUT/logs.tar.gz
echo "total $((SECONDS-T0)) s on $card"
