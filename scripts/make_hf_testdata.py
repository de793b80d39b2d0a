#!/usr/bin/env python3
"""make_hf_testdata.py: write a transformers-made GPT-2 checkpoint and its logits for druto's test.

What it does
    Builds a random-init transformers GPT2LMHeadModel (vocab 50257, n_positions 128, n_layer 2,
    n_embd 64, n_head 4; torch.manual_seed(SEED)), converts it to float16 and saves it with
    save_pretrained(safe_serialization=True) into the target folder (model.safetensors and
    config.json, exactly as transformers writes them). It then loads that folder back with
    torch_dtype=float32 (the fp16 weights upcast exactly, which is also what druto does), runs
    a fixed input of GPT-2 token ids ("Hello world" etc. plus a Bangla phrase's ids) in eval
    mode with eager attention on the CPU, and writes expected.json beside the model:
        input_ids       the fixed input (list of int)
        logit_ids       the vocabulary ids whose logits are stored (all 256 byte tokens' ids
                        0..255, every 197th id above, and 50256): the full rows would be 1.6 MB
        logits          [len(input_ids)][len(logit_ids)] float32 logits at those ids
        logsumexp       per position, logsumexp over all 50257 logits (float64 from float32)
        argmax          per position, the id of the largest logit over all 50257
        greedy          20 greedy tokens (argmax at the last position, appended, 20 times)
        versions        torch and transformers versions, dtype
    pkg/train/hf_test.go (TestTransformersGPT2) loads the folder with druto and compares.

Run (on a machine with torch and transformers, e.g. the GPU machine; the CPU is used):
    python3 scripts/make_hf_testdata.py pkg/train/testdata/hf-gpt2-tiny
    git add pkg/train/testdata/hf-gpt2-tiny && git commit -m "train: transformers GPT-2 testdata"
Re-running gives the same weights for the same torch version (fixed seed, CPU).
"""
import json
import os
import sys

SEED = 1234
INPUT_IDS = [15496, 995, 11, 616, 1438, 318, 371, 1437, 13, 220, 48071, 108, 48071, 123]
GREEDY = 20


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_hf_testdata.py OUT_DIR   (e.g. pkg/train/testdata/hf-gpt2-tiny)")
    out = sys.argv[1]
    import torch
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    cfg = GPT2Config(vocab_size=50257, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    model = GPT2LMHeadModel(cfg).eval()
    # Random-init biases and layernorm parameters are 0 and 1; perturb them so the test sees them.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.02)
    os.makedirs(out, exist_ok=True)
    model.to(torch.float16).save_pretrained(out, safe_serialization=True)

    kw = dict(torch_dtype=torch.float32)
    try:
        ref = GPT2LMHeadModel.from_pretrained(out, attn_implementation="eager", **kw).eval()
    except TypeError:  # transformers older than 4.36
        ref = GPT2LMHeadModel.from_pretrained(out, **kw).eval()
    ids = torch.tensor([INPUT_IDS])
    with torch.no_grad():
        logits = ref(ids).logits[0].float()  # (T, 50257)
        # Greedy decoding written out (argmax of the last position, full forward each step): what
        # generate(do_sample=False) does, without its end-of-text stop or length processors.
        seq = ids
        for _ in range(GREEDY):
            nxt = ref(seq).logits[0, -1].argmax()
            seq = torch.cat([seq, nxt.view(1, 1)], dim=1)
        greedy = seq[0, len(INPUT_IDS):].tolist()
    logit_ids = list(range(256)) + list(range(256 + 197, 50256, 197)) + [50256]
    exp = {
        "input_ids": INPUT_IDS,
        "logit_ids": logit_ids,
        "logits": [[float(row[i]) for i in logit_ids] for row in logits],
        "logsumexp": [float(torch.logsumexp(row.double(), 0)) for row in logits],
        "argmax": [int(row.argmax()) for row in logits],
        "greedy": greedy,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "saved_dtype": "float16", "seed": SEED},
    }
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(exp, f)
    files = sorted(os.listdir(out))
    sizes = {f: os.path.getsize(os.path.join(out, f)) for f in files}
    print(f"wrote {out}: {sizes}")
    print(f"greedy: {greedy}")


if __name__ == "__main__":
    main()
