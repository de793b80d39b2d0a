#!/usr/bin/env python3
"""torch_reference.py: write the PyTorch reference state file for druto's GPT tests.

What it does
    Builds a tiny GPT-2 exactly as nanoGPT does (pre-LN blocks, tied lm_head, LayerNorm eps 1e-5
    with bias, GELU tanh form, causal attention scaled by 1/sqrt(hs), learned position embedding,
    every Linear with bias) with V=256, maxT=16, L=2, NH=4, C=32 on the CPU in float32; runs one
    forward (logits, mean cross-entropy), one backward and ONE torch.optim.AdamW step
    (lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on every parameter with dim >= 2,
    0 on biases and layernorm parameters); and writes everything, little-endian, to
    pkg/gpt/testdata/gpt_tiny_state.bin (format below, and in scripts/README.md).
    The Go test pkg/gpt/refstate_test.go reads this file.

Initialisation (fixed seed, GPT-2 style): every weight matrix and both embeddings ~ N(0, 0.02);
    the residual projections attn.c_proj.weight and mlp.c_proj.weight ~ N(0, 0.02/sqrt(2L));
    then every bias and every layernorm weight/bias is perturbed by + N(0, 0.02) (biases start
    at 0, layernorm weights at 1) so that the test covers them. All random numbers come from one
    torch.Generator seeded with SEED, drawn in druto's flat-layout order, so the values do not
    depend on how nn.Module constructors consume the global RNG.

Run (Debian: apt-get install python3-torch python3-numpy; any PyTorch >= 1.13):
    /usr/bin/python3 scripts/torch_reference.py            # writes pkg/gpt/testdata/gpt_tiny_state.bin
    /usr/bin/python3 scripts/torch_reference.py --out X    # elsewhere
    It prints the loss, the parameter count and checksums (sha256 of the file, sums of each array).
    Re-running gives the same bytes (CPU, one thread, deterministic algorithms, fixed seed).

State file (all little-endian):
    int32[256]   header: [0]=20261202 magic, [1]=1 version, [2]=V, [3]=maxT, [4]=L, [5]=NH,
                 [6]=C, [7]=B, [8]=T, [9]=P (number of parameters), rest 0
    float32[8]   lr, beta1, beta2, eps, weight_decay, 0, 0, 0
    int32[B*T]   tokens (row-major (B,T))
    int32[B*T]   targets
    float32[P]   params in druto's flat layout (below), before the step
    float32[B*T*V] logits
    float32[1]   loss
    float32[P]   grads (same layout; the tied wte holds embedding + lm_head contributions)
    float32[P]   params after the AdamW step (same layout)

druto's flat layout (weights in nn.Linear (out,in) layout, i.e. exactly torch's .weight):
    wte (V,C); wpe (maxT,C); for each layer l: ln_1.weight (C), ln_1.bias (C),
    attn.c_attn.weight (3C,C), attn.c_attn.bias (3C), attn.c_proj.weight (C,C), attn.c_proj.bias (C),
    ln_2.weight (C), ln_2.bias (C), mlp.c_fc.weight (4C,C), mlp.c_fc.bias (4C),
    mlp.c_proj.weight (C,4C), mlp.c_proj.bias (C); then ln_f.weight (C), ln_f.bias (C).
"""

import argparse
import hashlib
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

MAGIC = 20261202
VERSION = 1
SEED = 20261202

# Config of the reference run (nanoGPT GPTConfig names in comments).
V = 256     # vocab_size
MAXT = 16   # block_size
L = 2       # n_layer
NH = 4      # n_head
C = 32      # n_embd
B = 2       # batch
T = 16      # sequence length

# AdamW hyper-parameters.
LR = 1e-3
BETA1 = 0.9
BETA2 = 0.95
EPS = 1e-8
WEIGHT_DECAY = 0.1


class CausalSelfAttention(nn.Module):
    """nanoGPT's attention: one Linear(C, 3C) split q|k|v, heads from view(B,T,NH,hs)."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=True)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=True)

    def forward(self, x):
        b, t, c = x.size()
        hs = c // self.n_head
        q, k, v = self.c_attn(x).split(c, dim=2)
        q = q.view(b, t, self.n_head, hs).transpose(1, 2)  # (B,NH,T,hs)
        k = k.view(b, t, self.n_head, hs).transpose(1, 2)
        v = v.view(b, t, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B,NH,T,T)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v  # (B,NH,T,hs)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP(nn.Module):
    """nanoGPT's MLP: Linear(C,4C), GELU (tanh form), Linear(4C,C)."""

    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=True)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=True)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    """Pre-LN block: x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))."""

    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5, elementwise_affine=True)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5, elementwise_affine=True)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    """nanoGPT's GPT with lm_head tied to wte."""

    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            h=nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd, eps=1e-5, elementwise_affine=True),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying

    def forward(self, idx, targets=None):
        b, t = idx.size()
        if t > self.block_size:
            raise ValueError("sequence length %d > block size %d" % (t, self.block_size))
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)  # (B,T,V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def flat_layout(model):
    """Returns [(name, tensor)] in druto's flat-layout order (wte once: it is tied)."""
    tr = model.transformer
    segs = [("wte", tr.wte.weight), ("wpe", tr.wpe.weight)]
    for l, blk in enumerate(tr.h):
        p = "h.%d." % l
        segs += [
            (p + "ln_1.weight", blk.ln_1.weight), (p + "ln_1.bias", blk.ln_1.bias),
            (p + "attn.c_attn.weight", blk.attn.c_attn.weight), (p + "attn.c_attn.bias", blk.attn.c_attn.bias),
            (p + "attn.c_proj.weight", blk.attn.c_proj.weight), (p + "attn.c_proj.bias", blk.attn.c_proj.bias),
            (p + "ln_2.weight", blk.ln_2.weight), (p + "ln_2.bias", blk.ln_2.bias),
            (p + "mlp.c_fc.weight", blk.mlp.c_fc.weight), (p + "mlp.c_fc.bias", blk.mlp.c_fc.bias),
            (p + "mlp.c_proj.weight", blk.mlp.c_proj.weight), (p + "mlp.c_proj.bias", blk.mlp.c_proj.bias),
        ]
    segs += [("ln_f.weight", tr.ln_f.weight), ("ln_f.bias", tr.ln_f.bias)]
    # Every parameter of the module appears exactly once.
    ids = {id(t) for _, t in segs}
    if len(ids) != len(segs) or ids != {id(p) for p in model.parameters()}:
        raise RuntimeError("flat layout does not cover the model's parameters exactly once")
    return segs


def init_gpt2(model, n_layer, gen):
    """GPT-2 init in layout order from gen, then perturb biases and layernorm parameters."""
    std_resid = 0.02 / math.sqrt(2 * n_layer)
    with torch.no_grad():
        for name, t in flat_layout(model):
            if name.endswith("c_proj.weight"):
                t.copy_(torch.randn(t.shape, generator=gen) * std_resid)
            elif t.dim() >= 2:
                t.copy_(torch.randn(t.shape, generator=gen) * 0.02)
            elif ".ln_" in name or name.startswith("ln_"):
                base = 1.0 if name.endswith(".weight") else 0.0
                t.copy_(base + torch.randn(t.shape, generator=gen) * 0.02)
            else:  # Linear bias: GPT-2 init is 0, perturbed
                t.copy_(torch.randn(t.shape, generator=gen) * 0.02)


def flat_values(segs, grad=False):
    """Concatenates the tensors (or their .grad) of segs into one float32 numpy vector."""
    parts = []
    for name, t in segs:
        src = t.grad if grad else t
        if src is None:
            raise RuntimeError("no gradient for " + name)
        parts.append(src.detach().reshape(-1).to(torch.float32).numpy())
    return np.concatenate(parts).astype("<f4")


def make_adamw(model):
    """torch.optim.AdamW with decay on dim >= 2 parameters only (two param groups)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": WEIGHT_DECAY},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    kw = dict(lr=LR, betas=(BETA1, BETA2), eps=EPS)
    try:  # the plain per-tensor loop; 'foreach' exists since torch 1.12
        return torch.optim.AdamW(groups, foreach=False, **kw)
    except TypeError:
        return torch.optim.AdamW(groups, **kw)


def build_state():
    """Runs the reference step and returns (header, hyper, tokens, targets, params, logits, loss, grads, after)."""
    torch.set_default_dtype(torch.float32)
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    gen = torch.Generator().manual_seed(SEED)

    model = GPT(V, MAXT, L, NH, C)
    init_gpt2(model, L, gen)
    segs = flat_layout(model)
    nparams = sum(t.numel() for _, t in segs)

    tokens = torch.randint(0, V, (B, T), generator=gen, dtype=torch.long)
    targets = torch.randint(0, V, (B, T), generator=gen, dtype=torch.long)

    params = flat_values(segs)
    model.train()  # no dropout exists, so train and eval agree
    opt = make_adamw(model)
    opt.zero_grad(set_to_none=True)
    logits, loss = model(tokens, targets)
    loss.backward()
    grads = flat_values(segs, grad=True)
    opt.step()
    after = flat_values(segs)

    header = np.zeros(256, dtype="<i4")
    header[:10] = [MAGIC, VERSION, V, MAXT, L, NH, C, B, T, nparams]
    hyper = np.array([LR, BETA1, BETA2, EPS, WEIGHT_DECAY, 0, 0, 0], dtype="<f4")
    return (header, hyper,
            tokens.numpy().astype("<i4").reshape(-1), targets.numpy().astype("<i4").reshape(-1),
            params, logits.detach().numpy().astype("<f4").reshape(-1),
            np.array([loss.item()], dtype="<f4"), grads, after)


def write_atomic(path, chunks):
    """Writes the concatenated bytes of chunks to path through a temp file and a rename."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            for c in chunks:
                f.write(c.tobytes())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "pkg", "gpt", "testdata", "gpt_tiny_state.bin")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.normpath(default_out), help="state file to write")
    args = ap.parse_args(argv)

    state = build_state()
    header, hyper, tokens, targets, params, logits, loss, grads, after = state
    write_atomic(args.out, state)

    with open(args.out, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    size = os.path.getsize(args.out)
    print("torch %s; wrote %s (%d bytes)" % (torch.__version__, args.out, size))
    print("config V=%d maxT=%d L=%d NH=%d C=%d B=%d T=%d P=%d" % tuple(header[2:10]))
    print("loss %.9g (ln V = %.6f)" % (loss[0], math.log(V)))
    for name, a in (("params", params), ("logits", logits), ("grads", grads), ("params_after", after)):
        print("sum(%s) %.9g  sum|%s| %.9g" % (name, a.astype(np.float64).sum(), name,
                                             np.abs(a.astype(np.float64)).sum()))
    print("sha256 %s" % digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
