# session 50 call C at 371e090: call B's Nsight Compute step alone (call B's
# cd left the folder it ran from).
T0=$SECONDS
[ -f build/gpu/REVISION ] && [ "$(cat build/gpu/REVISION)" = "$(tar -xJf build/c50/gpu.tar.xz -O gpu/REVISION)" ] || { rm -rf build/gpu && tar -xJf build/c50/gpu.tar.xz -C build; }
sed -n '/^M=/,$p' build/c50/b.sh > /tmp/ncu-part.sh
L=$OUT/calllogs; mkdir -p $L
stampl() { echo "# $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader); $(date -u +%FT%TZ); revision $(cat build/gpu/REVISION)"; }
pack() { tar -czf $OUT/calllogs.tar.gz -C $OUT calllogs; }
. /tmp/ncu-part.sh
