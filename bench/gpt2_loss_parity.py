#!/usr/bin/env python3
"""GPT-2 loss-curve parity: tessera and PyTorch train the same GPT-2 from the same weights on the same
batches with the same hyperparameters, and their loss curves must agree.

1. `build/bench/bench_models --loss-curve N --out-dir DIR` (tessera) writes DIR/init.safetensors (its
   initial weights in Hugging Face's GPT2LMHeadModel layout), DIR/batches.bin (N x B x (T + 1) int64
   tokens), DIR/meta.json (model and optimizer settings) and DIR/tessera_losses.json (its loss per step).
2. This script loads the weights into transformers' GPT2LMHeadModel when `transformers` imports (else into
   the plain GPT-2 below, with the same parameter names and Conv1D layout), trains N steps on the same
   batches: bf16 autocast (as meta.json says), fused AdamW with the same betas, eps, weight decay and
   learning-rate schedule (linear warm-up, cosine to min_lr at the last step), clip_grad_norm_ 1.0.
3. Both curves are smoothed (mean over 10-step windows) and compared: max relative difference of the
   smoothed losses; parity holds below 2%.

Builds nothing. Used by bench/run_models.py (--only parity: the rows of bench/results/models-partial.json;
--parity: rows of a full run's models.json), which keeps both raw curves and re-derives the difference
from them; run alone it prints the comparison and exits 0 when parity holds, 1 otherwise. --timeout bounds
the tessera run (seconds).
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WINDOW = 10
TARGET = 0.02


def read_safetensors(path):
    """{name: torch tensor} of a safetensors file (float32, float16, bfloat16, int64), without the
    safetensors package."""
    import torch
    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "I64": torch.int64,
              "F64": torch.float64}
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = bytearray(data[base + b:base + e])
        t = torch.frombuffer(buf, dtype=dtypes[info["dtype"]]) if e > b else torch.empty(0, dtype=dtypes[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out


def lr_at(step, warmup, total, lr, min_lr):
    """bench_models' schedule (apps' warmup_cosine_lr): linear warm-up, cosine to min_lr at step total - 1."""
    if step < warmup:
        return lr * (step + 1) / warmup
    decay = total - 1 - warmup
    if decay <= 0:
        return lr
    if step >= total - 1:
        return min_lr
    ratio = (step - warmup) / decay
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def plain_gpt2(meta):
    """GPT-2 with Hugging Face's parameter names and Conv1D layout (weight (in, out), y = x @ W + b), for a
    machine without transformers."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Conv1D(nn.Module):
        def __init__(self, nin, nout):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(nin, nout))
            self.bias = nn.Parameter(torch.zeros(nout))

        def forward(self, x):
            return torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight).view(*x.shape[:-1], -1)

    C, H, eps = meta["n_embd"], meta["n_head"], meta["layer_norm_epsilon"]

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj = Conv1D(C, 3 * C), Conv1D(C, C)

        def forward(self, x):
            B, T, _ = x.shape
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.c_proj = Conv1D(C, 4 * C), Conv1D(4 * C, C)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn = nn.LayerNorm(C, eps=eps), Attn()
            self.ln_2, self.mlp = nn.LayerNorm(C, eps=eps), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class Trunk(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(meta["vocab_size"], C)
            self.wpe = nn.Embedding(meta["n_positions"], C)
            self.h = nn.ModuleList([Block() for _ in range(meta["n_layer"])])
            self.ln_f = nn.LayerNorm(C, eps=eps)

    class GPT2(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = Trunk()

        def forward(self, idx):
            t = self.transformer
            x = t.wte(idx) + t.wpe(torch.arange(idx.size(1), device=idx.device))
            for b in t.h:
                x = b(x)
            return F.linear(t.ln_f(x), t.wte.weight)  # the tied head

    return GPT2()


def torch_curve(out_dir, device="cuda"):
    """Trains the PyTorch side; returns (losses, which model)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    with open(os.path.join(out_dir, "meta.json")) as f:
        meta = json.load(f)
    N, B, T = meta["steps"], meta["batch"], meta["seq"]
    state = read_safetensors(os.path.join(out_dir, "init.safetensors"))
    tokens = torch.from_numpy(np.fromfile(os.path.join(out_dir, "batches.bin"), dtype="<i8").reshape(N, B, T + 1))

    try:
        import transformers
        cfg = transformers.GPT2Config(
            vocab_size=meta["vocab_size"], n_positions=meta["n_positions"], n_embd=meta["n_embd"],
            n_layer=meta["n_layer"], n_head=meta["n_head"], activation_function="gelu_new", resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=meta["layer_norm_epsilon"], tie_word_embeddings=True)
        try:
            model = transformers.GPT2LMHeadModel(cfg, attn_implementation="sdpa")
        except TypeError:
            model = transformers.GPT2LMHeadModel(cfg)
        which = f"transformers {transformers.__version__} GPT2LMHeadModel"

        def logits_of(x):
            return model(input_ids=x).logits
    except ImportError:
        model = plain_gpt2(meta)
        which = "plain PyTorch GPT-2 (transformers not installed)"

        def logits_of(x):
            return model(x)

    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if k != "lm_head.weight" and not k.endswith((".attn.bias", ".attn.masked_bias"))]
    if missing or unexpected:
        raise RuntimeError(f"weights do not match: missing {missing}, unexpected {unexpected}")
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    model = model.to(device).train()
    params = list(model.parameters())  # the tied head once
    opt = torch.optim.AdamW(params, lr=meta["lr"], betas=tuple(meta["betas"]), eps=meta["eps"],
                            weight_decay=meta["weight_decay"], fused=True)
    amp = meta["amp"] == "bf16"
    tokens = tokens.to(device)
    losses = []
    for s in range(N):
        for g in opt.param_groups:
            g["lr"] = lr_at(s, meta["warmup"], N, meta["lr"], meta["min_lr"])
        x, y = tokens[s, :, :T].contiguous(), tokens[s, :, 1:].contiguous()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            logits = logits_of(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, meta["clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, which, meta


def smooth(xs, w=WINDOW):
    return [sum(xs[i:i + w]) / len(xs[i:i + w]) for i in range(0, len(xs), w)]


def compare(ts_losses, pt_losses):
    a, b = smooth(ts_losses), smooth(pt_losses)
    rel = [abs(x - y) / abs(y) for x, y in zip(a, b)]
    return max(rel), a, b


def python_sources_text(path, size=8 << 20):
    """Real text that every machine with Python has: the standard library's top-level .py files, in name
    order, concatenated up to `size` bytes and written to `path`. Byte-level GPT-2 learns it gradually,
    without the plateau and the loss spike where the Markov text's order-2 structure is found."""
    lib = os.path.dirname(os.__file__)
    out = bytearray()
    for name in sorted(os.listdir(lib)):
        if name.endswith(".py") and len(out) < size:
            with open(os.path.join(lib, name), "rb") as f:
                out += f.read()
    with open(path, "wb") as f:
        f.write(bytes(out[:size]))
    return path


def run(build, steps=200, config="small", batch=16, seq=256, text=None, out_dir=None, fp32=False, tessera_args=(),
        timeout=900):
    """Runs both sides; returns a dict: max_rel_diff, meets, the raw and smoothed curves, settings."""
    out_dir = out_dir or tempfile.mkdtemp(prefix="gpt2_parity_")
    if text == "python":
        text = python_sources_text(os.path.join(out_dir, "text.txt"))
    cmd = [os.path.join(build, "bench", "bench_models"), "--loss-curve", str(steps), "--out-dir", out_dir,
           "--config", config, "--batch", str(batch), "--seq", str(seq)]
    if text:
        cmd += ["--text", text]
    if fp32:
        cmd += ["--fp32"]
    cmd += list(tessera_args)
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout)
    with open(os.path.join(out_dir, "tessera_losses.json")) as f:
        ts_losses = json.load(f)["losses"]
    pt_losses, which, meta = torch_curve(out_dir)
    worst, a, b = compare(ts_losses, pt_losses)
    return {"max_rel_diff": worst, "meets": worst < TARGET, "tessera": ts_losses, "torch": pt_losses,
            "tessera_smoothed": a, "torch_smoothed": b, "torch_model": which, "meta": meta, "out_dir": out_dir}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--config", default="small", choices=["small", "124m"])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--text", default=None, help="train on this file's bytes; 'python': the Python standard library's sources "
                    "(default: a seeded order-2 Markov text)")
    ap.add_argument("--lr", type=float, default=None, help="peak learning rate (bench_models' default: 1e-3 small, 6e-4 124m)")
    ap.add_argument("--lr-warmup", type=int, default=None, help="warm-up steps (default: a tenth of the steps)")
    ap.add_argument("--fp32", action="store_true", help="float32 on both sides instead of bf16 autocast")
    ap.add_argument("--out-dir", default=None, help="where the two sides exchange weights and batches")
    ap.add_argument("--json-out", default=None, help="also write the result (curves included) as JSON here")
    ap.add_argument("--timeout", type=int, default=900, help="seconds for the tessera run, at most")
    ap.add_argument("--tessera-arg", action="append", default=[],
                    help="an extra bench_models argument, as --tessera-arg=--no-flash or --tessera-arg=--gpt-logits (repeatable)")
    a = ap.parse_args()
    extra = list(a.tessera_arg)
    if a.lr is not None:
        extra += ["--lr", repr(a.lr)]
    if a.lr_warmup is not None:
        extra += ["--lr-warmup", str(a.lr_warmup)]
    r = run(a.build, a.steps, a.config, a.batch, a.seq, a.text, a.out_dir, a.fp32, extra, a.timeout)
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(r, f)
    print(f"PyTorch side: {r['torch_model']}")
    print(f"{'steps':>9} {'tessera':>9} {'PyTorch':>9} {'rel diff':>9}")
    for i, (x, y) in enumerate(zip(r["tessera_smoothed"], r["torch_smoothed"])):
        print(f"{i * WINDOW:>4}-{min((i + 1) * WINDOW, a.steps) - 1:<4} {x:9.4f} {y:9.4f} {abs(x - y) / abs(y):9.2%}")
    print(f"max relative difference of the {WINDOW}-step means: {r['max_rel_diff']:.3%} (target < {TARGET:.0%}): "
          f"{'meets' if r['meets'] else 'FAILS'}")
    return 0 if r["meets"] else 1


if __name__ == "__main__":
    sys.exit(main())
