#!/usr/bin/env python3
"""The work of bench/models/bench_models.cpp in PyTorch, under the same row names, eager or through
torch.compile (--compile, Inductor's default mode; --compile max-autotune):
  gpt2      GPT-2 124M written plainly (nanoGPT's model: pre-norm blocks, GELU tanh, F.scaled_dot_product_
            attention with is_causal, the LM head tied to the token embedding, dropout 0), batch 16 x 1024,
            bfloat16 autocast, the (B T, V) logits and F.cross_entropy, clip_grad_norm_ 1.0, fused AdamW
            (lr 6e-4, betas (0.9, 0.95), eps 1e-8, weight decay 0.1); --gpt-vocab 50304,50257: one row per
            vocabulary (a name ends in _vN unless N is 50257, as bench_models'), token ids below 50257 as
            bench_models draws them;
  resnet50  torchvision's ResNet-50 (the same network written here when torchvision is missing), batch 256,
            224x224, channels-last, bfloat16 autocast, fused SGD momentum 0.9 weight decay 5e-5;
  mlp       784-512-512-10, batch 128, float32, fused SGD momentum 0.9 (tessera's SGD is fused by default);
  attention causal F.scaled_dot_product_attention forward + backward, bfloat16.
The first vocabulary's GPT-2 row runs first, then ResNet-50, then the other vocabularies, the MLP and
attention: a process stopped at its time limit has the headline rows. --compile max-autotune runs only the
GPT-2 and ResNet-50 training rows (the rows bench/run_models.py asks of it); --inductor ROW:KEY=VALUE sets
an Inductor option (torch._inductor.config.KEY) while a row's model compiles (an empty ROW: every row),
e.g. the max-autotune search that run_models.py narrows to cuBLAS and cuDNN
(:max_autotune_gemm_backends=ATEN and :max_autotune_conv_backends=ATEN).

One JSON object per line: {"name", "unit", "value", "ms", "peak_mem_bytes", "samples_ms", "warmup_s",
"mem_at_start_bytes"}, or {"name", "value": null, "error"} for a row that raised (the others go on).
Timing as the C++ side: CUDA events around --iters back-to-back steps after --warmup steps; "samples_ms"
holds each of the --runs measurements (ms per step), "ms" their median; "warmup_s" is the host time of the
warm-up steps (torch.compile compiles in them). Peak memory is torch.cuda.max_memory_allocated() over the
timed steps (reset after the warm-up; under CUDA graphs after the first warm-up step, Note [Peak memory
under CUDA graphs]); each row starts from an emptied allocator and a reset Dynamo
(mem_at_start_bytes says what was still allocated). With --compile the model (not the optimizer step)
goes through torch.compile.
"""
import argparse
import gc
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ARGS = None


def selected(name):
    return not ARGS.only or any(part in name for part in ARGS.only.split(",") if part)


def time_steps(step, iters=None):
    """(samples: ms per step of each run, peak allocated bytes over the timed steps, warm-up seconds)."""
    iters = iters or ARGS.iters
    graphs = ARGS.compile in CUDA_GRAPH_MODES
    warm = time.perf_counter()
    for i in range(ARGS.warmup):
        step()
        if graphs and i == 0:  # Note [Peak memory under CUDA graphs]
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - warm
    if not graphs:
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
    return t, torch.cuda.max_memory_allocated(), warmup_s


MEM_AT_START = {}  # row name -> bytes still allocated when its work began
# Note [Peak memory under CUDA graphs]: a CUDA graph's replay allocates nothing, so a peak reset after the
# warm-up would miss the step's activations (max-autotune's GPT-2 step read 1.5 GB). Under the modes that
# replay graphs the peak is reset after the first warm-up step instead (compilation, autotuning and
# cudnn.benchmark's trials happen there; CUDA graph trees record on the next calls), so that it holds the
# recording, whose allocations are the graphs' memory, and the timed replays.
CUDA_GRAPH_MODES = ("max-autotune", "reduce-overhead")


def emit_timed(name, unit, items, timing):
    """A timed row: value = items * 1000 / median ms (a rate), or the median ms itself (items None)."""
    samples, peak, warmup_s = timing
    ms = statistics.median(samples)
    print(json.dumps({"name": name, "unit": unit, "value": ms if items is None else items * 1000.0 / ms, "ms": ms,
                      "peak_mem_bytes": peak, "samples_ms": samples, "warmup_s": warmup_s,
                      "mem_at_start_bytes": MEM_AT_START.get(name)}), flush=True)


def emit(name, unit, value):
    print(json.dumps({"name": name, "unit": unit, "value": value}), flush=True)


def maybe_compile(model):
    if not ARGS.compile:
        return model
    if ARGS.compile == "default":
        return torch.compile(model)
    return torch.compile(model, mode=ARGS.compile)


def mark_step():
    """A new training step for CUDA graph trees (max-autotune's cudagraphs), so that the previous step's
    graph outputs may be overwritten; nothing otherwise."""
    if ARGS.compile in CUDA_GRAPH_MODES and hasattr(torch, "compiler") and \
            hasattr(torch.compiler, "cudagraph_mark_step_begin"):
        torch.compiler.cudagraph_mark_step_begin()


def ids_below(vocab):
    """GPT-2's tokenizer ids: the padded classes of a vocabulary above 50257 are never a token or target."""
    return min(vocab, 50257)


def gpt2_name(vocab):
    return f"gpt2_124m_train_b{ARGS.gpt_batch}x{ARGS.gpt_seq}" + (f"_v{vocab}" if vocab != 50257 else "")


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


def bench_gpt2(name, vocab):
    B, T = ARGS.gpt_batch, ARGS.gpt_seq
    model = GPT(block_size=max(1024, T), vocab_size=vocab).cuda().train()
    params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=6e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, fused=True)
    fwd = maybe_compile(model)
    x = torch.randint(0, ids_below(vocab), (B, T), device="cuda")
    y = torch.randint(0, ids_below(vocab), (B, T), device="cuda")

    def step():
        mark_step()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    emit_timed(name, "tokens/s", B * T, time_steps(step))


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


def bench_resnet50(name):
    B = ARGS.resnet_batch
    model, source = resnet50()
    model = model.cuda().to(memory_format=torch.channels_last).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5, fused=True)
    fwd = maybe_compile(model)
    x = torch.randn(B, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (B,), device="cuda")

    def step():
        mark_step()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(fwd(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    print(json.dumps({"resnet50_source": source}), flush=True)
    emit_timed(name, "images/s", B, time_steps(step))


# ---- MLP and attention ----------------------------------------------------------------------------------

def bench_mlp(name):
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).cuda()
    try:
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
    except (TypeError, RuntimeError):  # a PyTorch without fused SGD
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    fwd = maybe_compile(model)
    x = torch.randn(128, 784, device="cuda")
    y = torch.randint(0, 10, (128,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(fwd(x), y).backward()
        opt.step()

    emit_timed(name, "steps/s", 1, time_steps(step, iters=max(ARGS.iters, 50)))


def attention_name(B, H, T, D):
    return f"attention_causal_fwd_bwd_bf16_b{B}_h{H}_t{T}_d{D}"


def bench_attention(name, B, H, T, D):
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    dout = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16)
    attn = maybe_compile(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))

    def step():
        attn(q, k, v).backward(dout)
        q.grad = k.grad = v.grad = None

    timing = time_steps(step)
    emit_timed(name, "ms", None, timing)
    flops = 7.0 * 2.0 * B * H * D * T * T / 2.0
    emit(name + "_tflops", "TFLOP/s", flops / (statistics.median(timing[0]) * 1e9))


def reset_between_rows():
    """Frees what a row left: compiled graphs, CUDA graph trees' pools, cached blocks."""
    if ARGS.compile:
        try:
            torch._dynamo.reset()
            from torch._inductor import cudagraph_trees
            cudagraph_trees.reset_cudagraph_trees()
        except Exception:  # noqa: BLE001  (a PyTorch without them: nothing to reset)
            pass
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def inductor_patch(name):
    """The --inductor settings for this row ({key: value} of those whose ROW part is in its name)."""
    out = {}
    for spec in ARGS.inductor:
        row, _, kv = spec.partition(":")
        key, _, value = kv.partition("=")
        if row in name and key:
            out[key] = value
    return out


def guarded(name, work):
    """Runs one row's work (under its --inductor settings); an exception becomes an error row and the run
    goes on."""
    if not selected(name):
        return
    reset_between_rows()
    MEM_AT_START[name] = torch.cuda.memory_allocated()
    try:
        patch = inductor_patch(name) if ARGS.compile else {}
        if patch:
            import torch._inductor.config as inductor_config
            print(json.dumps({"inductor_settings": {name: patch}}), flush=True)
            with inductor_config.patch(patch):
                work()
        else:
            work()
    except Exception as e:  # noqa: BLE001  (out of memory, a compile failure: the other rows go on)
        msg = f"{type(e).__name__}: {e}"
        print(f"models.py: {name}: {msg}", file=sys.stderr, flush=True)
        print(json.dumps({"name": name, "value": None, "error": msg[:2000]}), flush=True)
    reset_between_rows()


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", nargs="?", const="default", default=None,
                    choices=["default", "max-autotune", "max-autotune-no-cudagraphs", "reduce-overhead"],
                    help="torch.compile the models (a bare --compile: Inductor's default mode)")
    ap.add_argument("--inductor", action="append", default=[], metavar="ROW:KEY=VALUE",
                    help="an Inductor setting (torch._inductor.config.KEY) for the rows whose name contains ROW, "
                    "e.g. resnet50:max_autotune_gemm_backends=ATEN (repeatable)")
    ap.add_argument("--gpt-vocab", default="50257", help="comma-separated vocabularies: one GPT-2 row each")
    ap.add_argument("--only", default="", help="the rows whose name contains one of these comma-separated parts")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--gpt-batch", type=int, default=16)
    ap.add_argument("--gpt-seq", type=int, default=1024)
    ap.add_argument("--resnet-batch", type=int, default=256)
    ARGS = ap.parse_args()
    try:
        vocabs = [int(v) for v in ARGS.gpt_vocab.split(",") if v]
    except ValueError:
        ap.error(f"--gpt-vocab {ARGS.gpt_vocab!r}: comma-separated integers")
    if not vocabs or min(vocabs) < 2:
        ap.error(f"--gpt-vocab {ARGS.gpt_vocab!r}: vocabularies of at least 2")
    if ARGS.compile:
        ARGS.warmup = max(ARGS.warmup, 3)  # the first calls compile
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "mode": "eager" if not ARGS.compile else "compile",
                      "compile_mode": ARGS.compile, "inductor": ARGS.inductor if ARGS.compile else []}),
          flush=True)
    jobs = [(gpt2_name(v), lambda v=v: bench_gpt2(gpt2_name(v), v)) for v in vocabs]
    resnet = f"resnet50_train_b{ARGS.resnet_batch}_224_cl_bf16"
    jobs.insert(1, (resnet, lambda: bench_resnet50(resnet)))  # after the headline GPT-2 row
    if ARGS.compile not in ("max-autotune", "max-autotune-no-cudagraphs"):  # max-autotune: the training rows
        jobs.append(("mlp_784_512_512_10_b128_sgd", lambda: bench_mlp("mlp_784_512_512_10_b128_sgd")))
        for shape in ((16, 12, 1024, 64), (8, 16, 2048, 128)):
            jobs.append((attention_name(*shape), lambda s=shape: bench_attention(attention_name(*s), *s)))
    for name, work in jobs:
        guarded(name, work)


if __name__ == "__main__":
    main()
