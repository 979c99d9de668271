#!/usr/bin/python3
"""Writes tests/nn/data/torch_reference.safetensors: inputs, state dicts and PyTorch's outputs for the
nn tests (modules, losses, attention), computed once with PyTorch 1.13 in float64 (and float32 where
the dtype is the point). The file is committed; rerun this script after changing a case.

Keys: "<case>/sd/<state-dict key>" (the module's state_dict, loaded by the C++ test with strict
load_state_dict, which also checks that tessera's parameter names are PyTorch's), "<case>/in/<name>"
and "<case>/out/<name>". Metadata "keys:<model>" lists a model's state_dict keys (JSON) for the
naming tests. What PyTorch 1.13 lacks (RMSNorm, scaled_dot_product_attention) is written out from
its definition in PyTorch's documentation.

usage: /usr/bin/python3 tests/nn/torch_reference.py
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import safetensors_io  # noqa: E402  (tests/common: the one safetensors reader and writer of the tests)
OUT = os.path.join(HERE, "data", "torch_reference.safetensors")

T = {}
META = {}


def put(case, kind, name, t):
    T[f"{case}/{kind}/{name}"] = t.detach().clone()


def put_module(case, m):
    for k, v in m.state_dict().items():
        put(case, "sd", k, v)


def randomize(m):
    """Random affine parameters, so that ones/zeros initializations do not hide a bug."""
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn_like(p) * 0.5 + (0.3 if p.dim() == 1 else 0.0))
    return m


def write(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    safetensors_io.write(path, T, META)


def modules():
    torch.set_default_dtype(torch.float64)

    m = nn.Linear(5, 3)
    x, x3 = torch.randn(4, 5), torch.randn(2, 3, 5)
    put_module("linear", m)
    put("linear", "in", "x", x)
    put("linear", "in", "x3", x3)
    put("linear", "out", "y", m(x))
    put("linear", "out", "y3", m(x3))

    m = nn.Linear(5, 3, bias=False)
    put_module("linear_nobias", m)
    put("linear_nobias", "in", "x", x)
    put("linear_nobias", "out", "y", m(x))

    m = nn.Bilinear(3, 4, 2)
    a, b = torch.randn(5, 3), torch.randn(5, 4)
    put_module("bilinear", m)
    put("bilinear", "in", "x1", a)
    put("bilinear", "in", "x2", b)
    put("bilinear", "out", "y", m(a, b))

    m = nn.Embedding(10, 4, padding_idx=2)
    idx = torch.tensor([[1, 2, 3, 9, 0], [2, 2, 7, 5, 4], [8, 6, 2, 1, 3]])
    put_module("embedding", m)
    put("embedding", "in", "idx", idx)
    put("embedding", "out", "y", m(idx))

    x = torch.linspace(-6, 6, 21).reshape(3, 7) + torch.randn(3, 7) * 0.1
    put("act", "in", "x", x)
    put("act", "out", "relu", nn.ReLU()(x))
    put("act", "out", "gelu", nn.GELU()(x))
    put("act", "out", "gelu_tanh", nn.GELU(approximate="tanh")(x))
    put("act", "out", "silu", nn.SiLU()(x))
    put("act", "out", "tanh", nn.Tanh()(x))
    put("act", "out", "sigmoid", nn.Sigmoid()(x))
    put("act", "out", "softmax1", nn.Softmax(dim=1)(x))
    put("act", "out", "softmax0", nn.Softmax(dim=0)(x))
    put("act", "out", "log_softmax1", nn.LogSoftmax(dim=1)(x))

    m = randomize(nn.LayerNorm([4, 5]))
    x = torch.randn(2, 3, 4, 5) * 3 + 1
    put_module("layer_norm", m)
    put("layer_norm", "in", "x", x)
    put("layer_norm", "out", "y", m(x))
    m32 = randomize(nn.LayerNorm(6, eps=1e-3)).float()
    x32 = (torch.randn(4, 6) * 2 + 5).float()
    put_module("layer_norm32", m32)
    put("layer_norm32", "in", "x", x32)
    put("layer_norm32", "out", "y", m32(x32))

    m = randomize(nn.GroupNorm(2, 6))
    x = torch.randn(3, 6, 4, 2) * 2 - 1
    put_module("group_norm", m)
    put("group_norm", "in", "x", x)
    put("group_norm", "out", "y", m(x))

    # RMSNorm (torch.nn.RMSNorm, PyTorch 2.4): y = x * rsqrt(mean(x^2 over the normalized dims) + eps) * weight,
    # eps defaulting to torch.finfo(x.dtype).eps.
    x = torch.randn(3, 2, 8)
    w = torch.randn(8)
    put("rms_norm", "sd", "weight", w)
    put("rms_norm", "in", "x", x)
    put("rms_norm", "out", "y", x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + torch.finfo(x.dtype).eps) * w)
    put("rms_norm", "out", "y_eps", x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 0.5) * w)
    w2 = torch.randn(2, 8)
    put("rms_norm", "in", "w2", w2)
    put("rms_norm", "out", "y2", x * torch.rsqrt(x.pow(2).mean((-2, -1), keepdim=True) + 1e-5) * w2)

    # BatchNorm: two training steps (running stats move), then evaluation with the running stats.
    m = randomize(nn.BatchNorm1d(4))
    put_module("bn1d", m)
    x1, x2, x3 = torch.randn(6, 4) * 2 + 1, torch.randn(5, 4, 3) - 2, torch.randn(3, 4)
    for i, xi in enumerate([x1, x2]):
        put("bn1d", "in", f"train{i}", xi)
        put("bn1d", "out", f"train{i}", m(xi))
    m.eval()
    put("bn1d", "in", "eval", x3)
    put("bn1d", "out", "eval", m(x3))
    for k, v in m.state_dict().items():
        put("bn1d", "out", "sd." + k, v)

    m = randomize(nn.BatchNorm2d(3, momentum=None))
    put_module("bn2d", m)
    x1, x2, x3 = torch.randn(2, 3, 4, 5) * 3, torch.randn(4, 3, 2, 2) + 1, torch.randn(1, 3, 2, 3)
    for i, xi in enumerate([x1, x2]):
        put("bn2d", "in", f"train{i}", xi)
        put("bn2d", "out", f"train{i}", m(xi))
    m.eval()
    put("bn2d", "in", "eval", x3)
    put("bn2d", "out", "eval", m(x3))
    for k, v in m.state_dict().items():
        put("bn2d", "out", "sd." + k, v)


def attention():
    torch.set_default_dtype(torch.float64)
    m = nn.MultiheadAttention(8, 2)
    with torch.no_grad():
        m.in_proj_bias.copy_(torch.randn(24) * 0.3)
        m.out_proj.bias.copy_(torch.randn(8) * 0.3)
    put_module("mha", m)
    q, k, v = torch.randn(3, 2, 8), torch.randn(4, 2, 8), torch.randn(4, 2, 8)
    for n, t in [("q", q), ("k", k), ("v", v)]:
        put("mha", "in", n, t)
    y, w = m(q, k, v)
    put("mha", "out", "y", y)
    put("mha", "out", "w", w)
    kpm = torch.tensor([[False, False, True, False], [False, True, True, False]])
    am = torch.tensor([[False, True, False, False], [False, False, False, True], [True, False, False, False]])
    put("mha", "in", "kpm", kpm)
    put("mha", "in", "am", am)
    y, w = m(q, k, v, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)
    put("mha", "out", "y_masked", y)
    put("mha", "out", "w_masked", w)
    fm = torch.randn(3, 4)
    put("mha", "in", "float_mask", fm)
    y, _ = m(q, q, q)
    put("mha", "out", "y_self", y)
    y, _ = m(q, k, v, attn_mask=fm)
    put("mha", "out", "y_float_mask", y)

    mb = nn.MultiheadAttention(8, 4, bias=False, batch_first=True)
    put_module("mha_bf", mb)
    qb, kb = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    put("mha_bf", "in", "q", qb)
    put("mha_bf", "in", "k", kb)
    y, w = mb(qb, kb, kb)
    put("mha_bf", "out", "y", y)
    put("mha_bf", "out", "w", w)
    y, w = mb(qb[0], kb[0], kb[0])  # unbatched
    put("mha_bf", "out", "y_unbatched", y)
    put("mha_bf", "out", "w_unbatched", w)

    # scaled_dot_product_attention (PyTorch 2.x) from its documented definition.
    def sdpa(q, k, v, mask=None, causal=False, scale=None):
        s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale)
        if causal:
            s = s.masked_fill(torch.ones(q.size(-2), k.size(-2), dtype=torch.bool).tril().logical_not(), float("-inf"))
        if mask is not None:
            s = s.masked_fill(mask.logical_not(), float("-inf")) if mask.dtype == torch.bool else s + mask
        return torch.softmax(s, -1) @ v

    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 6, 4), torch.randn(2, 3, 6, 7)
    bm = torch.rand(5, 6) > 0.3
    bm[:, 0] = True
    fm = torch.randn(2, 1, 5, 6)
    for n, t in [("q", q), ("k", k), ("v", v), ("bool_mask", bm), ("float_mask", fm)]:
        put("sdpa", "in", n, t)
    put("sdpa", "out", "plain", sdpa(q, k, v))
    put("sdpa", "out", "causal", sdpa(q, k[:, :, :5], v[:, :, :5], causal=True))
    put("sdpa", "out", "bool_mask", sdpa(q, k, v, bm))
    put("sdpa", "out", "float_mask", sdpa(q, k, v, fm, scale=0.3))


def losses():
    torch.set_default_dtype(torch.float64)
    c = "ce"
    x = torch.randn(6, 4) * 3
    t = torch.tensor([0, 3, 1, -100, 2, 3])
    w = torch.rand(4) + 0.5
    x3, t3 = torch.randn(2, 4, 3), torch.tensor([[0, 1, 3], [2, -100, 1]])
    p = torch.softmax(torch.randn(6, 4), 1)
    for n, v in [("x", x), ("t", t), ("w", w), ("x3", x3), ("t3", t3), ("p", p)]:
        put(c, "in", n, v)
    for r in ["none", "mean", "sum"]:
        put(c, "out", r, F.cross_entropy(x, t, reduction=r))
        put(c, "out", r + "_w", F.cross_entropy(x, t, weight=w, reduction=r))
        put(c, "out", r + "_ls", F.cross_entropy(x, t, reduction=r, label_smoothing=0.1))
        put(c, "out", r + "_w_ls", F.cross_entropy(x, t, weight=w, reduction=r, label_smoothing=0.2))
        put(c, "out", r + "_3d", F.cross_entropy(x3, t3, weight=w, reduction=r))
        put(c, "out", r + "_prob", F.cross_entropy(x, p, reduction=r))
        put(c, "out", r + "_prob_w_ls", F.cross_entropy(x, p, weight=w, reduction=r, label_smoothing=0.3))
        put(c, "out", r + "_nll", F.nll_loss(torch.log_softmax(x, 1), t, weight=w, reduction=r))
    put(c, "out", "ignore0", F.cross_entropy(x, t.clamp(min=0), ignore_index=3))
    put(c, "out", "unbatched", F.cross_entropy(x[0], t[0]))
    # Large logits: the log_softmax path stays finite.
    big = torch.tensor([[1000.0, -1000.0, 0.0], [-500.0, 500.0, 499.0]])
    put(c, "in", "big", big)
    put(c, "out", "big", F.cross_entropy(big, torch.tensor([1, 2]), reduction="none"))

    c = "reg"
    a, b = torch.randn(3, 5) * 2, torch.randn(3, 5) * 2
    put(c, "in", "a", a)
    put(c, "in", "b", b)
    for r in ["none", "mean", "sum"]:
        put(c, "out", "mse_" + r, F.mse_loss(a, b, reduction=r))
        put(c, "out", "l1_" + r, F.l1_loss(a, b, reduction=r))
        put(c, "out", "smooth_l1_" + r, F.smooth_l1_loss(a, b, reduction=r, beta=0.5))
        put(c, "out", "huber_" + r, F.huber_loss(a, b, reduction=r, delta=0.7))
    put(c, "out", "smooth_l1_beta0", F.smooth_l1_loss(a, b, beta=0.0))

    c = "bce"
    pr = torch.rand(4, 3) * 0.98 + 0.01
    pr[0, 0], pr[0, 1] = 0.0, 1.0  # log clamped at -100
    tg = torch.rand(4, 3)
    tg[0, 0], tg[0, 1] = 0.3, 0.6
    wt = torch.rand(4, 3) + 0.5
    logits = torch.randn(4, 3) * 4
    logits[1, 0], logits[1, 1] = 80.0, -80.0  # would overflow exp in the naive formula
    pw = torch.tensor([0.5, 2.0, 3.0])
    for n, v in [("p", pr), ("t", tg), ("w", wt), ("logits", logits), ("pw", pw)]:
        put(c, "in", n, v)
    for r in ["none", "mean", "sum"]:
        put(c, "out", "bce_" + r, F.binary_cross_entropy(pr, tg, reduction=r))
        put(c, "out", "bce_w_" + r, F.binary_cross_entropy(pr, tg, weight=wt, reduction=r))
        put(c, "out", "bcel_" + r, F.binary_cross_entropy_with_logits(logits, tg, reduction=r))
        put(c, "out", "bcel_w_pw_" + r, F.binary_cross_entropy_with_logits(logits, tg, weight=wt, reduction=r,
                                                                          pos_weight=pw))

    c = "kl"
    inp = torch.log_softmax(torch.randn(3, 5), 1)
    tgt = torch.softmax(torch.randn(3, 5), 1)
    tgt[0, 0] = 0.0
    ltgt = torch.log_softmax(torch.randn(3, 5), 1)
    for n, v in [("input", inp), ("target", tgt), ("log_target", ltgt)]:
        put(c, "in", n, v)
    for r in ["none", "mean", "sum", "batchmean"]:
        put(c, "out", r, F.kl_div(inp, tgt, reduction=r))
        put(c, "out", "log_" + r, F.kl_div(inp, ltgt, reduction=r, log_target=True))


def conv():
    torch.set_default_dtype(torch.float64)
    m = nn.Conv1d(4, 6, 3, stride=2, padding=1, groups=2)
    x = torch.randn(2, 4, 9)
    put_module("conv1d", m)
    put("conv1d", "in", "x", x)
    put("conv1d", "out", "y", m(x))
    m = nn.Conv2d(3, 4, (3, 2), stride=(2, 1), padding=1, dilation=(1, 2))
    x = torch.randn(2, 3, 7, 6)
    put_module("conv2d", m)
    put("conv2d", "in", "x", x)
    put("conv2d", "out", "y", m(x))
    m = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
    x = torch.randn(2, 4, 3, 5)
    put_module("conv_t2d", m)
    put("conv_t2d", "in", "x", x)
    put("conv_t2d", "out", "y", m(x))
    x = torch.randn(2, 3, 7, 8)
    put("pool", "in", "x", x)
    put("pool", "out", "max", nn.MaxPool2d(3, stride=2, padding=1)(x))
    put("pool", "out", "max_ceil", nn.MaxPool2d(2, ceil_mode=True)(x))
    put("pool", "out", "avg", nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)(x))
    put("pool", "out", "avg_pad", nn.AvgPool2d(2, stride=1, padding=1)(x))
    put("pool", "out", "adaptive", nn.AdaptiveAvgPool2d((3, 5))(x))


def naming():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Sequential(nn.Linear(8, 8)))
            self.layers = nn.ModuleList([nn.Linear(8, 8), nn.LayerNorm(8)])
            self.heads = nn.ModuleDict({"cls": nn.Linear(8, 3), "emb": nn.Embedding(5, 8)})
            self.attn = nn.MultiheadAttention(8, 2)

    net = Net()
    META["keys:net"] = json.dumps(list(net.state_dict().keys()))
    META["params:net"] = json.dumps([n for n, _ in net.named_parameters()])


def main():
    torch.manual_seed(20261130)
    modules()
    attention()
    losses()
    conv()
    naming()
    META["generator"] = "tests/nn/torch_reference.py with torch " + torch.__version__
    write(OUT)
    print(f"wrote {len(T)} tensors to {OUT}")


if __name__ == "__main__":
    main()
