#!/usr/bin/env python3
"""The work of bench/models/bench_models.cpp in PyTorch, under the same row names, eager or through
torch.compile (--compile):
  gpt2      GPT-2 124M written plainly (nanoGPT's model: pre-norm blocks, GELU tanh, F.scaled_dot_product_
            attention with is_causal, the LM head tied to the token embedding, dropout 0), batch 16 x 1024,
            bfloat16 autocast, clip_grad_norm_ 1.0, fused AdamW (lr 6e-4, betas (0.9, 0.95), weight decay 0.1);
  resnet50  torchvision's ResNet-50 (the same network written here when torchvision is missing), batch 256,
            224x224, channels-last, bfloat16 autocast, fused SGD momentum 0.9 weight decay 5e-5;
  mlp       784-512-512-10, batch 128, float32, SGD momentum 0.9;
  attention causal F.scaled_dot_product_attention forward + backward, bfloat16.
One JSON object per line: {"name", "unit", "value", "ms", "peak_mem_bytes"}. Timing as the C++ side: CUDA
events around --iters back-to-back steps after --warmup steps, median over --runs; peak memory is
torch.cuda.max_memory_allocated() over the timed steps (reset after the warm-up). With --compile the model
(not the optimizer step) goes through torch.compile; its compilation happens in the warm-up.
"""
import argparse
import json
import math
import statistics
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

ARGS = None


def selected(name):
    return not ARGS.only or ARGS.only in name


def time_steps(step, iters=None):
    iters = iters or ARGS.iters
    for _ in range(ARGS.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(ARGS.runs):
        start.record()
        for _ in range(iters):
            step()
        stop.record()
        stop.synchronize()
        t.append(start.elapsed_time(stop) / iters)
    return statistics.median(t), torch.cuda.max_memory_allocated()


def emit(name, unit, value, ms=None, peak=None):
    print(json.dumps({"name": name, "unit": unit, "value": value, "ms": ms, "peak_mem_bytes": peak}), flush=True)


def maybe_compile(model):
    return torch.compile(model) if ARGS.compile else model


# ---- GPT-2 (nanoGPT's model) ---------------------------------------------------------------------------

class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50257):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def bench_gpt2():
    B, T = ARGS.gpt_batch, ARGS.gpt_seq
    name = f"gpt2_124m_train_b{B}x{T}"
    if not selected(name):
        return
    model = GPT(block_size=max(1024, T)).cuda().train()
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    fwd = maybe_compile(model)
    x = torch.randint(0, 50257, (B, T), device="cuda")
    y = torch.randint(0, 50257, (B, T), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    ms, peak = time_steps(step)
    emit(name, "tokens/s", B * T * 1000.0 / ms, ms, peak)
    del model, opt, fwd, params


# ---- ResNet-50 ----------------------------------------------------------------------------------------

class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50(nn.Module):
    """torchvision's resnet50() (v1.5: the stride on the 3x3 convolution), with its state_dict names."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._layer(64, 3)
        self.layer2 = self._layer(128, 4, 2)
        self.layer3 = self._layer(256, 6, 2)
        self.layer4 = self._layer(512, 3, 2)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(2048, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _layer(self, planes, blocks, stride=1):
        down = None
        if stride != 1 or self.inplanes != planes * 4:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                                 nn.BatchNorm2d(planes * 4))
        layers = [Bottleneck(self.inplanes, planes, stride, down)]
        self.inplanes = planes * 4
        layers += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50():
    try:
        import torchvision
        return torchvision.models.resnet50(), "torchvision"
    except ImportError:
        return ResNet50(), "bench/torch/models.py"


def bench_resnet50():
    B = ARGS.resnet_batch
    name = f"resnet50_train_b{B}_224_cl_bf16"
    if not selected(name):
        return
    model, source = resnet50()
    model = model.cuda().to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5, fused=True)
    fwd = maybe_compile(model)
    x = torch.randn(B, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (B,), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    ms, peak = time_steps(step)
    emit(name, "images/s", B * 1000.0 / ms, ms, peak)
    print(json.dumps({"resnet50_source": source}), flush=True)
    del model, opt, fwd


# ---- MLP and attention ----------------------------------------------------------------------------------

def bench_mlp():
    name = "mlp_784_512_512_10_b128_sgd"
    if not selected(name):
        return
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    fwd = maybe_compile(model)
    x = torch.randn(128, 784, device="cuda")
    y = torch.randint(0, 10, (128,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(fwd(x), y).backward()
        opt.step()

    ms, peak = time_steps(step, iters=max(ARGS.iters, 50))
    emit(name, "steps/s", 1000.0 / ms, ms, peak)


def bench_attention(B, H, T, D):
    name = f"attention_causal_fwd_bwd_bf16_b{B}_h{H}_t{T}_d{D}"
    if not selected(name):
        return
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16)
    attn = maybe_compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))

    def step():
        attn(q, k, v).backward(dout)
        q.grad = k.grad = v.grad = None

    ms, peak = time_steps(step)
    emit(name, "ms", ms, ms, peak)
    flops = 7.0 * 2.0 * B * H * D * T * T / 2.0
    emit(name + "_tflops", "TFLOP/s", flops / (ms * 1e9))


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", action="store_true", help="torch.compile the models")
    ap.add_argument("--only", default="")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--gpt-batch", type=int, default=16)
    ap.add_argument("--gpt-seq", type=int, default=1024)
    ap.add_argument("--resnet-batch", type=int, default=256)
    ARGS = ap.parse_args()
    if ARGS.compile:
        ARGS.warmup = max(ARGS.warmup, 3)  # the first calls compile
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "mode": "compile" if ARGS.compile else "eager"}), flush=True)
    for fn in (bench_gpt2, bench_resnet50, bench_mlp, lambda: bench_attention(16, 12, 1024, 64),
               lambda: bench_attention(8, 16, 2048, 128)):
        try:
            fn()
        except Exception as e:  # a row that cannot run (out of memory, compile failure): the others go on
            print(f"models.py: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
