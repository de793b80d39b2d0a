#!/usr/bin/env bash
# cpu-sample-bench.sh: generation on this CPU, druto beside PyTorch in the
# same run, on the same gpt2-124M checkpoint (one training step from GPT-2's
# initialisation, made here), greedy, a 16-token prompt (ids 0..15) and 128
# new tokens, THREADS threads (2):
#   - PyTorch: ../shared/anchors/torch_sample_bench.py, with and without its
#     cache (Debian's python3-torch);
#   - druto sample --ids --stats on the same checkpoint: time to first token
#     (load + prefill) and the generated ids, compared with PyTorch's;
#   - druto bench --sample: prefill and decode rates of gpt2-124M (that
#     checkpoint) and of the tiny and small presets (random), fp32 and bf16,
#     beside the weight-read bound at the copy bandwidth measured in the run;
#   - PyTorch once more, so that each side has a run before and after the
#     other's (a shared machine drifts).
# Writes RESULTS/NAME.json (druto's report), NAME-torch.jsonl (PyTorch's
# lines, both runs) and NAME.txt (the log: stats, ids compared). RESULTS is
# build/results by default, outside what git tracks; RESULTS=bench/results
# writes a record to keep (the notebooks list bench/results/*.json, so add
# its row to bench/results/README.md).
#
#   scripts/cpu-sample-bench.sh sample-try
#   RESULTS=bench/results scripts/cpu-sample-bench.sh sample-cpu-epyc-zen4
set -euo pipefail
cd "$(dirname "$0")/.."
name=${1:?usage: scripts/cpu-sample-bench.sh NAME}
threads=${THREADS:-2}
anchor=../shared/anchors/torch_sample_bench.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rev=$(git rev-parse --short HEAD)
go build -ldflags "-X github.com/druto/druto.Revision=$rev" -o "$work/druto" ./cmd/druto
results=${RESULTS:-build/results}
mkdir -p "$results"
out=$results/$name
log=$out.txt
{
  echo "# $(date -u +%FT%TZ) git $rev, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $threads threads"
  "$work/druto" train --preset gpt2-124M --steps 1 --batch 1 --seq 16 --eval-every 0 --sample-tokens 1 \
    --out "$work/ck" --backend cpu --threads "$threads" >/dev/null
  ck=$work/ck/model.safetensors
  ids=$(seq -s, 0 15)
  PROMPT_IDS=$ids /usr/bin/python3 "$anchor" "$ck" 128 16 "$threads" | tee "$out-torch.jsonl"
  "$work/druto" sample --checkpoint "$ck" --ids --prompt-ids "$ids" --tokens 128 --temperature 0 --stats \
    --backend cpu --threads "$threads" > "$work/ids.json" 2> "$work/stats.txt"
  cat "$work/stats.txt"
  python3 - "$work/ids.json" "$out-torch.jsonl" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read().splitlines()[0])["generated_ids"]
t = [json.loads(l) for l in open(sys.argv[2])][-1]["generated_ids"]
print(json.dumps({"greedy_ids_equal_pytorch": d == t, "druto_ids": d, "pytorch_ids": t}))
PY
  "$work/druto" bench --sample --backend cpu --threads "$threads" --checkpoint "$ck" \
    --configs tiny:1x16,small:1x16,gpt2-124M:1x16 --modes fused+fp32,fused+bf16 --tokens 128 --json "$out.json"
  PROMPT_IDS=$ids /usr/bin/python3 "$anchor" "$ck" 128 16 "$threads" | tee -a "$out-torch.jsonl"
} 2>&1 | tee "$log"
