#!/usr/bin/env python3
"""torch_eval.py: evaluate a druto checkpoint (model.safetensors) with PyTorch.

What it does
    Loads the safetensors checkpoint that druto writes (Hugging Face GPT-2 tensor names, Conv1D
    layout, lm_head tied to wte and not stored, config as strings in __metadata__), builds
    transformers.GPT2LMHeadModel when `transformers` is importable, else an equivalent plain-torch
    GPT-2 with the same names and Conv1D semantics (y = x @ W + b), and prints the mean
    cross-entropy over a data file as JSON on stdout: {"loss": x}. Details go to stderr.

Batching (as llm.c's data loader): the tokens are the file's bytes (byte-level, vocab 256), or an
    llm.c .bin shard (int32[256] header: magic 20240520, version 1, token count; then uint16
    tokens). Batch k takes tokens[k*B*T : k*B*T + B*T] as B rows of T inputs and the same window
    shifted by one as targets; batches are consecutive (stride B*T) and only whole batches count
    (a batch needs B*T+1 tokens). The result is the mean over batches of each batch's mean loss.

Run (Debian: apt-get install python3-torch python3-numpy; float32 on the CPU by default):
    /usr/bin/python3 scripts/torch_eval.py --checkpoint run/model.safetensors --data val.txt \
        --batch 4 --seq 64 [--max-batches N] [--backend auto|transformers|plain] [--device cpu]
    /usr/bin/python3 scripts/torch_eval.py --self-test     # checks this script; see scripts/README.md

Checkpoint tensors (C = n_embd, Conv1D weight = transposed nn.Linear weight, shape (in, out)):
    transformer.wte.weight (V,C), transformer.wpe.weight (maxT,C),
    transformer.h.{l}.ln_1.weight/bias (C), transformer.h.{l}.attn.c_attn.weight (C,3C) / bias (3C),
    transformer.h.{l}.attn.c_proj.weight (C,C) / bias (C), transformer.h.{l}.ln_2.weight/bias (C),
    transformer.h.{l}.mlp.c_fc.weight (C,4C) / bias (4C), transformer.h.{l}.mlp.c_proj.weight (4C,C)
    / bias (C), transformer.ln_f.weight/bias (C). Metadata: "n_embd", "n_layer", "n_head",
    "n_positions", "vocab_size" (decimal strings), "format": "pt". Dtypes F32, F16, BF16, F64 are
    read; the model is evaluated in float32.
"""

import argparse
import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

SHARD_MAGIC = 20240520
SHARD_VERSION = 1
CONFIG_KEYS = ("n_embd", "n_layer", "n_head", "n_positions", "vocab_size")

_NP_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "BF16": "<u2", "I32": "<i4", "I64": "<i8"}


# ---------------------------------------------------------------- safetensors

def read_safetensors(path):
    """Returns (tensors, metadata): float32 torch tensors by name and the __metadata__ dict.

    Uses the safetensors package when importable, else parses the file directly
    (u64 little-endian header length, JSON header, raw little-endian data)."""
    try:
        from safetensors import safe_open  # optional
    except ImportError:
        safe_open = None
    if safe_open is not None:
        out = {}
        with safe_open(path, framework="pt") as f:
            meta = dict(f.metadata() or {})
            for k in f.keys():
                out[k] = f.get_tensor(k).to(torch.float32)
        return out, meta
    return read_safetensors_plain(path)


def read_safetensors_plain(path):
    """read_safetensors without the safetensors package."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: too short for a safetensors file" % path)
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError("%s: header length %d beyond the file (%d bytes)" % (path, n, len(raw)))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = memoryview(raw)[8 + n:]
    meta = dict(header.pop("__metadata__", None) or {})
    out = {}
    for name, info in header.items():
        dt = info["dtype"]
        if dt not in _NP_DTYPES:
            raise ValueError("%s: tensor %s has unsupported dtype %s" % (path, name, dt))
        begin, end = info["data_offsets"]
        shape = [int(s) for s in info["shape"]]
        npdt = np.dtype(_NP_DTYPES[dt])
        count = int(np.prod(shape)) if shape else 1
        if end - begin != count * npdt.itemsize or end > len(data):
            raise ValueError("%s: tensor %s: offsets [%d,%d) do not fit shape %s %s"
                             % (path, name, begin, end, shape, dt))
        a = np.frombuffer(data[begin:end], dtype=npdt, count=count)
        if dt == "BF16":  # bfloat16 = the high 16 bits of a float32
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = torch.from_numpy(a.astype(np.float32).reshape(shape))
    return out, meta


def write_safetensors(path, tensors, metadata, dtype="F32"):
    """Writes tensors (name -> torch tensor) as a safetensors file, atomically.

    dtype is "F32", "F16" or "BF16". Used by the self-test; druto writes its own."""
    header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}}
    blobs, off = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.float32).contiguous()
        if dtype == "F32":
            b = t.numpy().astype("<f4").tobytes()
        elif dtype == "F16":
            b = t.numpy().astype("<f2").tobytes()
        elif dtype == "BF16":
            b = t.to(torch.bfloat16).view(torch.int16).numpy().astype("<i2").tobytes()
        else:
            raise ValueError("unsupported dtype " + dtype)
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)  # pad the header to 8 bytes, as the reference writer does
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(hj)))
            f.write(hj)
            for b in blobs:
                f.write(b)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def config_from_metadata(meta):
    """Returns the GPT-2 config ints from the checkpoint metadata (decimal strings)."""
    missing = [k for k in CONFIG_KEYS if k not in meta]
    if missing:
        raise ValueError("checkpoint metadata lacks %s (has %s)" % (", ".join(missing), sorted(meta)))
    try:
        cfg = {k: int(meta[k]) for k in CONFIG_KEYS}
    except ValueError as e:
        raise ValueError("checkpoint metadata: %s" % e)
    if min(cfg.values()) <= 0 or cfg["n_embd"] % cfg["n_head"] != 0:
        raise ValueError("checkpoint metadata: bad config %s" % cfg)
    return cfg


def expected_shapes(cfg):
    """Returns {name: shape} of every tensor a checkpoint of cfg must hold."""
    V, P, C, L = cfg["vocab_size"], cfg["n_positions"], cfg["n_embd"], cfg["n_layer"]
    s = {"transformer.wte.weight": (V, C), "transformer.wpe.weight": (P, C),
         "transformer.ln_f.weight": (C,), "transformer.ln_f.bias": (C,)}
    for l in range(L):
        p = "transformer.h.%d." % l
        s.update({
            p + "ln_1.weight": (C,), p + "ln_1.bias": (C,),
            p + "attn.c_attn.weight": (C, 3 * C), p + "attn.c_attn.bias": (3 * C,),
            p + "attn.c_proj.weight": (C, C), p + "attn.c_proj.bias": (C,),
            p + "ln_2.weight": (C,), p + "ln_2.bias": (C,),
            p + "mlp.c_fc.weight": (C, 4 * C), p + "mlp.c_fc.bias": (4 * C,),
            p + "mlp.c_proj.weight": (4 * C, C), p + "mlp.c_proj.bias": (C,),
        })
    return s


def check_tensors(tensors, cfg):
    """Raises ValueError unless tensors hold exactly the expected names and shapes."""
    want = expected_shapes(cfg)
    extra = sorted(set(tensors) - set(want) - {"lm_head.weight"})
    missing = sorted(set(want) - set(tensors))
    if extra or missing:
        raise ValueError("checkpoint tensors: missing %s, unexpected %s" % (missing, extra))
    for name, shape in want.items():
        if tuple(tensors[name].shape) != tuple(shape):
            raise ValueError("checkpoint tensor %s has shape %s, want %s"
                             % (name, tuple(tensors[name].shape), tuple(shape)))
    if "lm_head.weight" in tensors and not torch.equal(tensors["lm_head.weight"], tensors["transformer.wte.weight"]):
        raise ValueError("checkpoint stores lm_head.weight different from transformer.wte.weight (not tied)")


# ---------------------------------------------------------------- plain-torch GPT-2 (HF names)

class Conv1D(nn.Module):
    """Hugging Face's Conv1D: weight (in, out), y = x @ W + b."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n_in, n_out))
        self.bias = nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


class PlainAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = Conv1D(n_embd, 3 * n_embd)
        self.c_proj = Conv1D(n_embd, n_embd)

    def forward(self, x):
        b, t, c = x.shape
        hs = c // self.n_head
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.n_head, hs).transpose(1, 2)
        k = k.view(b, t, self.n_head, hs).transpose(1, 2)
        v = v.view(b, t, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class PlainMLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = Conv1D(n_embd, 4 * n_embd)
        self.c_proj = Conv1D(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))  # gelu_new


class PlainBlock(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = PlainAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = PlainMLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class PlainGPT2(nn.Module):
    """GPT-2 with Hugging Face parameter names; lm_head tied to wte. forward(idx) -> logits."""

    def __init__(self, cfg):
        super().__init__()
        C = cfg["n_embd"]
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg["vocab_size"], C),
            wpe=nn.Embedding(cfg["n_positions"], C),
            h=nn.ModuleList([PlainBlock(C, cfg["n_head"]) for _ in range(cfg["n_layer"])]),
            ln_f=nn.LayerNorm(C, eps=1e-5),
        ))

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for blk in self.transformer.h:
            x = blk(x)
        x = self.transformer.ln_f(x)
        return x @ self.transformer.wte.weight.t()  # tied lm_head


class _HFWrapper(nn.Module):
    """transformers.GPT2LMHeadModel behind forward(idx) -> logits."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    def forward(self, idx):
        return self.hf(input_ids=idx).logits


def build_model(tensors, cfg, backend="auto"):
    """Returns (model, backend_used): a module mapping idx (B,T) to logits (B,T,V), weights loaded."""
    check_tensors(tensors, cfg)
    sd = {k: v for k, v in tensors.items() if k != "lm_head.weight"}
    if backend in ("auto", "transformers"):
        try:
            import transformers
        except ImportError:
            if backend == "transformers":
                raise
            transformers = None
        if transformers is not None:
            conf = transformers.GPT2Config(
                vocab_size=cfg["vocab_size"], n_positions=cfg["n_positions"], n_embd=cfg["n_embd"],
                n_layer=cfg["n_layer"], n_head=cfg["n_head"], activation_function="gelu_new",
                layer_norm_epsilon=1e-5, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                tie_word_embeddings=True)
            hf = transformers.GPT2LMHeadModel(conf)
            res = hf.load_state_dict(sd, strict=False)
            unexpected = list(res.unexpected_keys)
            missing = [k for k in res.missing_keys
                       if k != "lm_head.weight" and not k.endswith(("attn.bias", "attn.masked_bias"))]
            if unexpected or missing:
                raise ValueError("transformers GPT2LMHeadModel: missing %s, unexpected %s" % (missing, unexpected))
            hf.tie_weights()
            if hf.lm_head.weight.data_ptr() != hf.transformer.wte.weight.data_ptr():
                raise ValueError("transformers GPT2LMHeadModel: lm_head is not tied to wte")
            return _HFWrapper(hf), "transformers " + transformers.__version__
    if backend not in ("auto", "plain"):
        raise ValueError("unknown backend %r" % backend)
    model = PlainGPT2(cfg)
    model.load_state_dict(sd, strict=True)
    return model, "plain torch " + torch.__version__


def load_checkpoint(path, backend="auto"):
    """Reads a druto checkpoint and returns (model, cfg, backend_used), the model in eval mode."""
    tensors, meta = read_safetensors(path)
    cfg = config_from_metadata(meta)
    model, used = build_model(tensors, cfg, backend)
    model.eval()
    return model, cfg, used


# ---------------------------------------------------------------- data and evaluation

def read_tokens(path):
    """Returns the tokens of path as an int64 numpy array: an llm.c shard or raw bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) >= 1024:
        hdr = np.frombuffer(raw[:1024], dtype="<i4")
        if hdr[0] == SHARD_MAGIC:
            if hdr[1] != SHARD_VERSION:
                raise ValueError("%s: llm.c shard version %d, want %d" % (path, hdr[1], SHARD_VERSION))
            n = int(hdr[2])
            if len(raw) != 1024 + 2 * n:
                raise ValueError("%s: llm.c shard says %d tokens but holds %d bytes of them"
                                 % (path, n, len(raw) - 1024))
            return np.frombuffer(raw[1024:], dtype="<u2").astype(np.int64)
    return np.frombuffer(raw, dtype=np.uint8).astype(np.int64)


def evaluate(model, tokens, B, T, vocab, max_batches=0, device="cpu"):
    """Returns (mean loss over batches, batches) with llm.c batching (see the module doc)."""
    if B <= 0 or T <= 0:
        raise ValueError("batch and seq must be positive")
    if len(tokens) and int(tokens.max()) >= vocab:
        raise ValueError("token %d outside the model's vocabulary of %d" % (int(tokens.max()), vocab))
    n = (len(tokens) - 1) // (B * T) if len(tokens) > 0 else 0
    if max_batches > 0:
        n = min(n, max_batches)
    if n <= 0:
        raise ValueError("data has %d tokens: fewer than one batch needs (B*T+1 = %d)" % (len(tokens), B * T + 1))
    total = 0.0
    toks = torch.from_numpy(tokens)
    with torch.no_grad():
        for k in range(n):
            off = k * B * T
            x = toks[off:off + B * T].view(B, T).to(device)
            y = toks[off + 1:off + B * T + 1].view(B, T).to(device)
            logits = model(x).float()
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
    return total / n, n


# ---------------------------------------------------------------- self-test

def to_hf(model):
    """Converts a nanoGPT-layout torch_reference.GPT (nn.Linear weights) to HF tensors (Conv1D)."""
    out = {}
    for name, t in model.state_dict().items():
        if name == "lm_head.weight":
            continue  # tied to wte
        key = name if name.startswith("transformer.") else "transformer." + name
        if name.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight")):
            t = t.t()
        out[key] = t.detach().clone().contiguous()
    return out


def self_test():
    """Checks reading, model building and evaluation against an independent nanoGPT model."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import subprocess
    import torch_reference as ref

    torch.manual_seed(1)
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(7)
    cfg = {"vocab_size": 256, "n_positions": 24, "n_embd": 48, "n_layer": 3, "n_head": 6}
    B, T = 3, 20
    src = ref.GPT(cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"], cfg["n_head"], cfg["n_embd"])
    ref.init_gpt2(src, cfg["n_layer"], gen)
    src.eval()
    meta = {k: str(v) for k, v in cfg.items()}
    meta["format"] = "pt"
    failures = []

    def check(what, got, want, rtol=1e-5):
        ok = abs(got - want) <= 1e-6 + rtol * abs(want)
        print("%-58s got %.9g want %.9g %s" % (what, got, want, "ok" if ok else "FAIL"), file=sys.stderr)
        if not ok:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        ck = os.path.join(d, "model.safetensors")
        write_safetensors(ck, to_hf(src), meta)
        # Data: random bytes, not a whole number of batches (the tail is dropped).
        data = torch.randint(0, 256, (4 * B * T + 7,), generator=gen).numpy().astype(np.uint8)
        txt = os.path.join(d, "data.txt")
        with open(txt, "wb") as f:
            f.write(data.tobytes())
        shard = os.path.join(d, "data.bin")
        hdr = np.zeros(256, dtype="<i4")
        hdr[:3] = [SHARD_MAGIC, SHARD_VERSION, len(data)]
        with open(shard, "wb") as f:
            f.write(hdr.tobytes() + data.astype("<u2").tobytes())

        # Reference: the nanoGPT model itself, same batching.
        toks = torch.from_numpy(data.astype(np.int64))
        n = (len(data) - 1) // (B * T)
        want = 0.0
        with torch.no_grad():
            for k in range(n):
                o = k * B * T
                _, l = src(toks[o:o + B * T].view(B, T), toks[o + 1:o + B * T + 1].view(B, T))
                want += l.item()
        want /= n

        # The plain reader returns exactly what was written; the tensors check passes.
        tensors, m2 = read_safetensors_plain(ck)
        hf = to_hf(src)
        same = set(tensors) == set(hf) and all(torch.equal(tensors[k], hf[k]) for k in hf)
        check("plain safetensors reader round trip (1 = exact)", float(same), 1.0, 0)
        check("metadata config round trip (1 = exact)", float(config_from_metadata(m2) == cfg), 1.0, 0)

        backends = ["plain"]
        try:
            import transformers  # noqa: F401
            backends.append("transformers")
        except ImportError:
            print("transformers not importable: only the plain-torch backend is checked", file=sys.stderr)
        for be in backends:
            model, c2, used = load_checkpoint(ck, be)
            got, nb = evaluate(model, read_tokens(txt), B, T, c2["vocab_size"])
            check("%s: loss, byte data, %d batches" % (used, nb), got, want)
            got, _ = evaluate(model, read_tokens(shard), B, T, c2["vocab_size"])
            check("%s: loss, llm.c shard" % used, got, want)
            x = toks[:B * T].view(B, T)
            with torch.no_grad():
                lg, _ = src(x)
                dmax = (model(x) - lg).abs().max().item()
            check("%s: max |logits - nanoGPT logits|" % used, dmax, 0.0)

        # The command line, as a user runs it.
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--checkpoint", ck, "--data", txt,
                              "--batch", str(B), "--seq", str(T), "--backend", "plain"],
                             check=True, stdout=subprocess.PIPE).stdout
        check("CLI JSON loss", json.loads(out)["loss"], want)
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--checkpoint", ck, "--data", shard,
                              "--batch", str(B), "--seq", str(T), "--max-batches", "1", "--backend", "plain"],
                             check=True, stdout=subprocess.PIPE).stdout
        with torch.no_grad():
            _, l1 = src(toks[:B * T].view(B, T), toks[1:B * T + 1].view(B, T))
        check("CLI JSON loss, --max-batches 1", json.loads(out)["loss"], l1.item())

        # 16-bit checkpoints decode to the rounded values.
        for dt, tdt in (("BF16", torch.bfloat16), ("F16", torch.float16)):
            p = os.path.join(d, "model_%s.safetensors" % dt)
            write_safetensors(p, hf, meta, dtype=dt)
            t16, _ = read_safetensors_plain(p)
            ok = all(torch.equal(t16[k], hf[k].to(tdt).to(torch.float32)) for k in hf)
            check("%s reader decodes the rounded values (1 = exact)" % dt, float(ok), 1.0, 0)

        # Damaged checkpoints are refused.
        bad = dict(hf)
        bad["transformer.h.0.attn.c_attn.weight"] = hf["transformer.h.0.attn.c_attn.weight"].t().contiguous()
        p = os.path.join(d, "bad.safetensors")
        write_safetensors(p, bad, meta)
        try:
            load_checkpoint(p, "plain")
            refused = 0.0
        except ValueError:
            refused = 1.0
        check("nn.Linear-layout c_attn refused (1 = refused)", refused, 1.0, 0)

    if failures:
        print("self-test FAILED: %s" % "; ".join(failures), file=sys.stderr)
        return 1
    print("self-test passed", file=sys.stderr)
    return 0


# ---------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", help="druto model.safetensors")
    ap.add_argument("--data", help="byte-level text file or llm.c .bin token shard")
    ap.add_argument("--batch", type=int, default=4, help="B: windows per batch")
    ap.add_argument("--seq", type=int, default=64, help="T: tokens per window")
    ap.add_argument("--max-batches", type=int, default=0, help="evaluate at most this many batches (0: all)")
    ap.add_argument("--backend", default="auto", choices=["auto", "transformers", "plain"],
                    help="auto: transformers when importable, else plain torch")
    ap.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    ap.add_argument("--self-test", action="store_true", help="check this script and exit")
    args = ap.parse_args(argv)

    torch.set_default_dtype(torch.float32)
    if args.self_test:
        return self_test()
    if not args.checkpoint or not args.data:
        ap.error("--checkpoint and --data are required")
    try:
        model, cfg, used = load_checkpoint(args.checkpoint, args.backend)
        if args.seq > cfg["n_positions"]:
            raise ValueError("--seq %d exceeds the model's n_positions %d" % (args.seq, cfg["n_positions"]))
        model.to(args.device)
        tokens = read_tokens(args.data)
        loss, n = evaluate(model, tokens, args.batch, args.seq, cfg["vocab_size"], args.max_batches, args.device)
    except (OSError, ValueError) as e:
        print("torch_eval: %s" % e, file=sys.stderr)
        return 1
    print("torch_eval: %s, config %s, %d tokens, %d batches of %dx%d"
          % (used, cfg, len(tokens), n, args.batch, args.seq), file=sys.stderr)
    print(json.dumps({"loss": loss}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
