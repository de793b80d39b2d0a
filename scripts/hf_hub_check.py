#!/usr/bin/env python3
"""hf_hub_check.py: a transformers GPT-2 in the Hugging Face cache, loaded by name by druto.

What it checks (issue 35's last must-show; run on the GPU machine, where torch and transformers
are installed and there is no network):
    1. A random gpt2-medium (n_embd 1024, n_layer 24, n_head 16, vocab 50257, n_positions 1024),
       seeded, saved by transformers' save_pretrained in float16 (safetensors).
    2. The files are placed in a Hugging Face cache exactly as huggingface_hub lays it out:
       models--gpt2-medium/blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs/<sha256>,
       refs/main = <commit>. transformers itself then loads the model from that cache with
       local_files_only=True (the layout is the one it reads).
    3. The same token ids (a seeded llm.c .bin shard: int32[256] header with magic 20240520,
       version 1 and the count, then uint16 tokens) are evaluated by transformers (float32, the
       fp16 weights upcast) and by `druto eval --checkpoint gpt2-medium` with HF_HUB_OFFLINE=1,
       on the GPU and on the CPU. Batching is druto's (and llm.c's): batch k is tokens
       [k*B*T, k*B*T + B*T) as B rows of T, targets shifted by one, whole batches only; the
       loss is the mean over batches of each batch's mean cross-entropy.
    4. |druto - transformers| <= 2e-3 for each backend; prints one JSON line and exits 1 if not.

Run:
    /usr/bin/python3 scripts/hf_hub_check.py --druto build/gpu/druto [--batch 4 --seq 256 --batches 4]
"""

import argparse
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile


def place_in_cache(src, cache, repo, commit):
    """Copies the files of folder src into cache as huggingface_hub would have downloaded them."""
    top = os.path.join(cache, "models--" + repo.replace("/", "--"))
    blobs = os.path.join(top, "blobs")
    snap = os.path.join(top, "snapshots", commit)
    os.makedirs(blobs, exist_ok=True)
    os.makedirs(snap, exist_ok=True)
    os.makedirs(os.path.join(top, "refs"), exist_ok=True)
    for name in sorted(os.listdir(src)):
        with open(os.path.join(src, name), "rb") as f:
            data = f.read()
        sha = hashlib.sha256(data).hexdigest()
        with open(os.path.join(blobs, sha), "wb") as f:
            f.write(data)
        os.symlink(os.path.join("..", "..", "blobs", sha), os.path.join(snap, name))
    with open(os.path.join(top, "refs", "main"), "w") as f:
        f.write(commit)
    return snap


def write_shard(path, tokens):
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%dH" % len(tokens), *tokens))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--druto", required=True, help="the druto binary")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--tol", type=float, default=2e-3)
    ap.add_argument("--backends", default="gpu,cpu")
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(35)
    work = tempfile.mkdtemp(prefix="hfcheck-")
    cfg = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=1024, n_layer=24, n_head=16)
    model = GPT2LMHeadModel(cfg).to(torch.float16)
    saved = os.path.join(work, "saved")
    model.save_pretrained(saved, safe_serialization=True)
    del model
    cache = os.path.join(work, "hub")
    commit = hashlib.sha1(b"druto issue 35 gpt2-medium").hexdigest()
    place_in_cache(saved, cache, "gpt2-medium", commit)
    print("files:", sorted(os.listdir(saved)), file=sys.stderr)

    # transformers reads the cache it would have written (offline).
    hf = GPT2LMHeadModel.from_pretrained("gpt2-medium", cache_dir=cache, local_files_only=True,
                                         torch_dtype=torch.float32)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    hf = hf.to(dev).eval()

    B, T, nb = a.batch, a.seq, a.batches
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, 50257, (nb * B * T + 1,), generator=g).tolist()
    shard = os.path.join(work, "tokens.bin")
    write_shard(shard, tokens)

    t = torch.tensor(tokens, dtype=torch.long)
    losses = []
    with torch.no_grad():
        for k in range(nb):
            x = t[k * B * T: k * B * T + B * T].view(B, T).to(dev)
            y = t[k * B * T + 1: k * B * T + B * T + 1].view(B, T).to(dev)
            logits = hf(x).logits.float()
            losses.append(torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)).item())
    ref = sum(losses) / len(losses)

    env = dict(os.environ, HF_HUB_CACHE=cache, HF_HUB_OFFLINE="1")
    env.pop("HF_HOME", None)
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "transformers_loss": ref,
           "batch": B, "seq": T, "batches": nb, "tol": a.tol}
    ok = True
    for be in a.backends.split(","):
        r = subprocess.run([a.druto, "eval", "--checkpoint", "gpt2-medium", "--data", shard, "--batch", str(B),
                            "--seq", str(T), "--backend", be], env=env, capture_output=True, text=True)
        print(r.stderr, file=sys.stderr)
        if r.returncode != 0:
            out["druto_" + be] = "exit %d: %s" % (r.returncode, r.stderr.strip().splitlines()[-1:])
            ok = False
            continue
        got = json.loads(r.stdout)["loss"]
        out["druto_" + be] = got
        out["diff_" + be] = abs(got - ref)
        ok = ok and abs(got - ref) <= a.tol
    out["ok"] = ok
    print(json.dumps(out))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
