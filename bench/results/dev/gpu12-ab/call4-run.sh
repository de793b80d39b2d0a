#!/usr/bin/env bash
# run.sh: session 33's third druto call (df0f353, the fixed-width layernorm
# kernels): A/B against a0468b7 (A) in two rounds of opposite order, the
# GPU tests of package gpu (conformance, fixed width, TMA, streams, graphs,
# PDL), detect, and the 300-step tiny training run with its evals.
set -uo pipefail
cd "$(dirname "$0")/../.."
C=build/carry4
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
dx() { if command -v xz >/dev/null; then xz -d -T8 -c "$1"; else python3 -c "import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())" "$1"; fi; }
rm -rf build/gpu; mkdir -p build/gpu $C/a && dx $C/gpu.tar.xz | tar xf - -C build/gpu && dx $C/a.tar.xz | tar xf - -C $C/a
cp $C/a/druto $C/druto-A; cp build/gpu/druto $C/druto-N
W=$(mktemp -d)
L=$W/ab.log
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; echo "A = $(cat $C/a/REVISION), N = $(cat build/gpu/REVISION)"; } > $L
OPS=copy,layernorm_fwd,residual_layernorm_fwd,layernorm_bwd
run() { echo "## round $1 variant $2 $(date -u +%T)"; DRUTO_SELFTEST=report timeout 90 $C/druto-$2 bench --backend gpu --kernels --ops $OPS --json $W/k-$1-$2.json 2>&1 | grep -v cuBLASLt; echo "rc=${PIPESTATUS[0]}"; }
{ run 1 A; run 1 N; run 2 N; run 2 A; } >> $L 2>&1
OUT=$W/main BINS="device-gpu" TESTS='^TestGPU(LayerNorm|StreamRows|GraphBitIdentical|Core|PDL|BuildAndCache|Conformance)' TEST_SHARDS=2 timeout 400 scripts/gpu-bench.sh detect tests train > $W/gpu-bench.out 2>&1
tar czf $OUT/call3.tar.gz -C $W .
echo "== summary"; grep -E '^## round|rc=' $L | paste - - | head
for f in $W/k-*.json; do python3 - "$f" <<'PY'
import json,sys
d=json.load(open(sys.argv[1]))
out=[]
for rec in d['records']:
  for r in rec.get('kernels') or []:
    if r.get('mode') in ('fused','fused-tma','fused-generic','fused-stream','cast-stream'):
        out.append('%s/%s %.1f'%(r['name'][:6],r['mode'][6:] or 'one',100*r['gbps']/r['ceiling_gbps']))
print(sys.argv[1].split('/')[-1], ' '.join(out))
PY
done
tail -5 $W/gpu-bench.out; ls $W/main
grep -hE "^(--- |ok|FAIL|PASS)" $W/main/*tests* $W/main/test-* 2>/dev/null | sort | uniq -c | sort -rn | head -30
grep -E "done, step 300|\"loss\"" $W/main/train.log | head -5
grep -E "cases|failed|gpu_usable" $W/main/env.log $W/main/detect.json 2>/dev/null | head -5
