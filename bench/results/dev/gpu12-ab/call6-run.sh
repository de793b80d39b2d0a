#!/usr/bin/env bash
# tests.sh: session 33's fifth call: the GPU tests of package gpu on fd203cb
# (the fourth call's tests ran past their section's timeout: the
# conformance test alone takes ~160 s), in two processes side by side.
set -uo pipefail
cd "$(dirname "$0")/../.."
C=build/carry5
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
rm -rf build/gpu; mkdir -p build/gpu && xz -d -T8 -c $C/gpu.tar.xz | tar xf - -C build/gpu
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; echo "revision $(cat build/gpu/REVISION)"; } > $OUT/env.log
cd pkg/device/gpu
T=../../../build/gpu/device-gpu.test
DRUTO_REQUIRE_GPU=1 timeout 270 $T -test.run '^TestGPUConformance$' -test.v -test.timeout 265s > $OUT/tests-conformance.log 2>&1 &
DRUTO_REQUIRE_GPU=1 timeout 200 $T -test.run '^TestGPU(LayerNorm|StreamRows|GraphBitIdentical|Core|PDL|BuildAndCache)' -test.v > $OUT/tests-rest.log 2>&1; echo "rest rc=$?" >> $OUT/tests-rest.log
wait $!; echo "conformance rc=$?" >> $OUT/tests-conformance.log
grep -hE "^(--- |ok|PASS|FAIL|panic)|rc=" $OUT/tests-*.log
