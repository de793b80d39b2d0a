#!/usr/bin/env bash
# run.sh: session 33's first GPU call: A/B of layernorm variants (A = main
# a0468b7 with the cast-stream rows; P forward loads evict-first; O forward
# with 6 register groups and 12 blocks an SM; Q TMA backward loads
# evict-first; W TMA backward with per-warp rings; R TMA backward with the
# reduce fused behind a grid barrier), two rounds of opposite order, and the
# bit-exactness tests of Q, W, R.
set -uo pipefail
cd "$(dirname "$0")/../.."
C=build/carry3
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
dx() { if command -v xz >/dev/null; then xz -d -T8 -c "$1"; else python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" "$1"; fi; }
mkdir -p build/gpu && dx $C/gpu.tar.xz | tar xf - -C build/gpu
cp build/gpu/druto $C/druto-A
for v in P O Q W R; do dx $C/druto-$v.xz > $C/druto-$v; chmod +x $C/druto-$v; done
for v in Q W R; do dx $C/device-gpu-$v.test.xz > $C/device-gpu-$v.test; chmod +x $C/device-gpu-$v.test; done
W=$(mktemp -d)
L=$W/ab.log
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader; date -u; echo "A = $(cat build/gpu/REVISION)"; } > $L
OPS=copy,layernorm_fwd,residual_layernorm_fwd,layernorm_bwd
run() { echo "## round $1 variant $2 $(date -u +%T)"; DRUTO_SELFTEST=report timeout 90 $C/druto-$2 bench --backend gpu --kernels --ops $OPS --json $W/k-$1-$2.json 2>&1 | grep -v cuBLASLt; echo "rc=${PIPESTATUS[0]}"; }
{ for v in A P O Q W R; do run 1 $v; done; for v in R W Q O P A; do run 2 $v; done; } >> $L 2>&1
T=$W/tests.log
for v in Q W R; do
  echo "## tests $v $(date -u +%T)" >> $T
  (cd pkg/device/gpu && DRUTO_REQUIRE_GPU=1 timeout 120 ../../../$C/device-gpu-$v.test -test.run '^TestGPU(LayerNormBackwardTMA|GraphBitIdentical|PDLStep)$' -test.v 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic)|differ|layernorm' | head -40; echo "rc=${PIPESTATUS[0]}") >> $T
done
tar czf $OUT/call1.tar.gz -C $W .
echo "== summary"; grep -E '^## round|rc=' $L | paste - - | head -20
for f in $W/k-*.json; do python3 - "$f" <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
out=[]
for rec in d['records']:
  for r in rec.get('kernels') or []:
    if r.get('mode') in ('fused-stream','cast-stream','copy-stream'):
        out.append('%s/%s %.1f'%(r['name'][:14],r['mode'][:6],100*r['gbps']/r['ceiling_gbps']))
print(sys.argv[1].split('/')[-1], ' '.join(out))
PY
done
cat $T | grep -E '^##|^--- |rc='
