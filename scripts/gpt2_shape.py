#!/usr/bin/env python3
"""gpt2_shape.py: a GPT-2 of a released shape (medium, large, xl) with random weights, as
transformers lays it out: OUT/config.json and OUT/model.safetensors (float16, Conv1D layout,
"transformer." names, lm_head tied to wte so not stored). druto train --init OUT/model.safetensors
fine-tunes it (scripts/gpu-bench.sh fit).

Weights: normal(0, 0.02), layernorm weights 1, biases 0 (GPT-2's initialisation without the
scaled residual projections), drawn by torch (on the GPU when there is one) from --seed.
--sparse writes the header and a file of the right size with no data (zeros; no torch needed):
enough for `druto train --dry-run --init`, which reads only the header and config.json.

    python3 scripts/gpt2_shape.py xl /tmp/gpt2-xl [--seed 42] [--sparse]
"""

import argparse
import json
import os
import struct

SHAPES = {  # n_embd, n_layer, n_head
    "medium": (1024, 24, 16),
    "large": (1280, 36, 20),
    "xl": (1600, 48, 25),
}
VOCAB, POSITIONS = 50257, 1024


def tensors(C, L):
    """(name, shape, kind) in transformers' order; kind: w (normal), one, zero."""
    out = [("transformer.wte.weight", [VOCAB, C], "w"), ("transformer.wpe.weight", [POSITIONS, C], "w")]
    for i in range(L):
        p = "transformer.h.%d." % i
        out += [
            (p + "ln_1.weight", [C], "one"), (p + "ln_1.bias", [C], "zero"),
            (p + "attn.c_attn.weight", [C, 3 * C], "w"), (p + "attn.c_attn.bias", [3 * C], "zero"),
            (p + "attn.c_proj.weight", [C, C], "w"), (p + "attn.c_proj.bias", [C], "zero"),
            (p + "ln_2.weight", [C], "one"), (p + "ln_2.bias", [C], "zero"),
            (p + "mlp.c_fc.weight", [C, 4 * C], "w"), (p + "mlp.c_fc.bias", [4 * C], "zero"),
            (p + "mlp.c_proj.weight", [4 * C, C], "w"), (p + "mlp.c_proj.bias", [C], "zero"),
        ]
    return out + [("transformer.ln_f.weight", [C], "one"), ("transformer.ln_f.bias", [C], "zero")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--sparse", action="store_true", help="header only: no weights (for dry runs)")
    a = ap.parse_args()
    C, L, H = SHAPES[a.shape]
    os.makedirs(a.out, exist_ok=True)
    cfg = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": VOCAB,
           "n_positions": POSITIONS, "n_ctx": POSITIONS, "n_embd": C, "n_layer": L, "n_head": H,
           "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "tie_word_embeddings": True,
           "torch_dtype": "float16"}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    ts = tensors(C, L)
    header, off = {}, 0
    for name, shape, _ in ts:
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "F16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    path = os.path.join(a.out, "model.safetensors")
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        if a.sparse:
            f.truncate(8 + len(hj) + off)
        else:
            import torch

            dev = "cuda" if torch.cuda.is_available() else "cpu"
            g = torch.Generator(device=dev).manual_seed(a.seed)
            for name, shape, kind in ts:
                if kind == "w":
                    t = torch.randn(shape, generator=g, device=dev) * 0.02
                else:
                    t = torch.full(shape, 1.0 if kind == "one" else 0.0, device=dev)
                f.write(t.to(torch.float16).cpu().contiguous().view(torch.uint8).numpy().tobytes())
    os.replace(tmp, path)
    n = sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in header.items() if k != "__metadata__") // 2
    print("gpt2_shape.py: %s (C %d, L %d, H %d), %d parameters (wte of %d rows) -> %s%s"
          % (a.shape, C, L, H, n, VOCAB, path, " (sparse: no weights)" if a.sparse else ""))


if __name__ == "__main__":
    main()
