"""The codegen rows of bench/compile/bench_compile.cpp in PyTorch: the same programs (a 12-op pointwise
chain with a broadcast, softmax, residual add + layer norm, RMS norm), shapes and dtype (float32), and on
the GPU the inference rows (ResNet-50 batch 256 channels-last and GPT-2 124M's logits over 16 x 1024
tokens, bfloat16 autocast) and ResNet-50's kernel count, forward under no_grad, in eager and under
torch.compile: mode max-autotune-no-cudagraphs (its autotuned Triton kernels without CUDA graphs, which
the tessera rows do not use either) for the small rows; the default mode for the models (ResNet-50 and
GPT-2), whose max-autotune convolution and GEMM searches took 457 s for ResNet-50 at batch 1 alone on
the H200, past the time of a run. Each row names its mode (compile_kind).

Timing as bench_compile's: per round, `iters` calls timed by the host clock around a synchronize;
the rows print every round's figure. One JSON object per line:
{"name", "unit": "ms", "eager_samples", "compile_samples", "compile_s"} (compile_s: the first
compiled call, compile included).

--compile-time: instead, the first call of torch.compile (default mode, its fastest to compile) on
bench_compile's compile-time rows: ResNet-50's inference forward (batch 256, 224x224, channels-last,
bf16 autocast) and GPT-2 124M's training step, loss forward and backward (4 x 1024 tokens, bf16
autocast), each beside one eager call; run_compile.py runs it with Inductor's and Triton's caches on a
fresh folder (cold), then again on the same folder (warm). GPU only.
usage: compile_ops.py [--device cuda] [--rounds 5] [--compile-time]
"""
import argparse
import contextlib
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402  (the GPT-2 and ResNet-50 of bench_models' PyTorch side)


def chain(x, y):
    t = torch.relu(x * 2.0 + y)
    u = torch.where(t > 0.5, t, torch.sigmoid(y)).clamp(0.1, 0.9)
    return F.gelu(u) + torch.tanh(x).exp() - x / 3.0


def works(dev):
    rows = 16384 if dev.startswith("cuda") else 2048
    chain_rows = 4096 if dev.startswith("cuda") else 1024
    g = torch.Generator(device="cpu").manual_seed(0)

    def randn(*s):
        return torch.randn(*s, generator=g).to(dev)

    x, y = randn(chain_rows, 4096), randn(4096)
    yield f"call pointwise-chain {chain_rows * 4096 >> 20}M forward (codegen)", chain, (x, y)
    x = randn(rows, 1024)
    yield f"call softmax {rows}x1024 forward (codegen)", lambda x: torch.softmax(x * 0.125, -1), (x,)
    x, r, w = randn(rows, 768), randn(rows, 768), randn(768)
    yield (f"call add+layernorm {rows}x768 forward (codegen)",
           lambda x, r, w: F.layer_norm(x + r, (768,), w, w, 1e-5), (x, r, w))
    x, w = randn(rows, 4096), randn(4096)
    yield f"call rmsnorm {rows}x4096 forward (codegen)", lambda x, w: F.rms_norm(x, (4096,), w, 1e-6), (x, w)


def inference_works(dev):
    """ResNet-50 (batch 256, 224x224, channels-last) and GPT-2 124M's logits (16 x 1024) under bfloat16
    autocast, float32 weights: bench_compile's bench_inference rows."""
    if not dev.startswith("cuda"):
        return
    net, _ = models.resnet50()
    net = net.to(dev).eval().to(memory_format=torch.channels_last)
    x = torch.randn(256, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)
    yield "call resnet50 inference b256 224 cl bf16 forward (codegen)", net, (x,), 5
    gpt = models.GPT(block_size=1024).to(dev).eval()

    def logits(idx):
        T = idx.size(1)
        h = gpt.wte(idx) + gpt.wpe(torch.arange(T, device=idx.device))
        for block in gpt.h:
            h = block(h)
        return gpt.lm_head(gpt.ln_f(h))

    idx = torch.randint(0, 50257, (16, 1024), device=dev)
    yield "call gpt2-124m inference 16x1024 bf16 logits forward (codegen)", logits, (idx,), 5


def graph_steps(dev):
    """bench_compile's ReduceOverhead rows: a whole training step (zero_grad, forward, loss, backward, SGD
    with momentum), eager and as PyTorch's torch.cuda.graph replay of the same step (static inputs,
    three warm-up steps on a side stream, then the capture): the MLP 784-512-512-10 (batch 128, float32)
    and GPT-2 124M (1 x 256 tokens, bf16 autocast; vocabulary 50304, the padded size tessera's GPT-2
    computes its logits over)."""
    if not dev.startswith("cuda"):
        return
    mlp = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                              torch.nn.Linear(512, 10)).to(dev)
    x, y = torch.randn(128, 784, device=dev), torch.randint(0, 10, (128,), device=dev)
    yield ("call mlp-784-512-512-10 b128 sgd train step (reduce-overhead)", mlp,
           lambda: F.cross_entropy(mlp(x), y), 0.01, 100)
    gpt = models.GPT(block_size=1024, vocab_size=50304).to(dev).train()
    idx, tgt = torch.randint(0, 50257, (1, 256), device=dev), torch.randint(0, 50257, (1, 256), device=dev)

    def gpt_loss():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return gpt(idx, tgt)
    yield "call gpt2-124m 1x256 bf16 sgd train step (reduce-overhead)", gpt, gpt_loss, 1e-4, 20


def graph_step_row(name, model, loss_fn, lr, iters, rounds, sync):
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss.detach()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    e, c = [], []
    for _ in range(rounds):
        c.append(timed(graph.replay, (), iters, sync))
        e.append(timed(step, (), iters, sync))
    return {"name": name, "unit": "ms", "eager_samples": e, "compile_samples": c,
            "compile_kind": "torch.cuda.graph replay of the whole step"}


def kernel_count(fn, args):
    """CUDA kernels one call launches (torch.profiler's device events that are kernels, not copies or sets)."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len([n for n in names if not n.startswith(("Memcpy", "Memset"))])


def launches(dev):
    """ResNet-50's inference forward (batch 1, float32): kernels launched eagerly and under torch.compile,
    beside bench_compile's launch row (tessera counts the steps that launch device work)."""
    net, _ = models.resnet50()
    net = net.to(dev).eval()
    x = torch.randn(1, 3, 224, 224, device=dev)
    compiled = torch.compile(net)  # the default mode (see the module's comment)
    compiled(x)
    net(x)
    return {"name": "launches resnet50 inference forward (codegen)", "unit": "launches",
            "compile_kind": "torch.compile mode default",
            "eager_samples": [kernel_count(net, (x,))], "compile_samples": [kernel_count(compiled, (x,))]}


def timed(fn, args, iters, sync):
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(*args)
    sync()
    return (time.perf_counter() - t0) * 1000.0 / iters


def bench_row(name, fn, fargs, iters, rounds, sync, mode="max-autotune-no-cudagraphs"):
    row = {"name": name, "unit": "ms", "compile_kind": f"torch.compile mode {mode}"}
    try:
        compiled = torch.compile(fn, mode=None if mode == "default" else mode)
        sync()
        t0 = time.perf_counter()
        compiled(*fargs)
        sync()
        row["compile_s"] = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001 - a failed compile is reported, not fatal
        compiled, row["compile_error"] = None, str(e)[:300]
    fn(*fargs)
    e, c = [], []
    for _ in range(rounds):
        if compiled is not None:
            c.append(timed(compiled, fargs, iters, sync))
        e.append(timed(fn, fargs, iters, sync))
    row["eager_samples"], row["compile_samples"] = e, c or None
    return row


def first_call_row(name, fn, step, sync):
    """The first call of torch.compile(fn) through step (compile included), and one eager call after a
    warm-up call."""
    compiled = torch.compile(fn)
    sync()
    t0 = time.perf_counter()
    step(compiled)
    sync()
    first = (time.perf_counter() - t0) * 1000.0
    step(fn)
    sync()
    t0 = time.perf_counter()
    step(fn)
    sync()
    return {"name": name, "unit": "ms", "compile_samples": [first],
            "eager_samples": [(time.perf_counter() - t0) * 1000.0]}


def compile_time(dev, sync):
    net, _ = models.resnet50()
    net = net.to(dev).eval().to(memory_format=torch.channels_last)
    x = torch.randn(256, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)

    def infer(f):
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            f(x)
    print(json.dumps(first_call_row("compile resnet50 inference first call (codegen)", net, infer, sync)), flush=True)
    del net, x
    gpt = models.GPT(block_size=1024).to(dev).train()
    idx = torch.randint(0, 50257, (4, 1024), device=dev)
    tgt = torch.randint(0, 50257, (4, 1024), device=dev)

    def train(f):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = f(idx, tgt)
        loss.backward()
    print(json.dumps(first_call_row("compile gpt2-124m train step first call (codegen)", gpt, train, sync)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--compile-time", action="store_true")
    args = ap.parse_args()
    dev = args.device
    cuda = dev.startswith("cuda")
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    iters = 50 if cuda else 3
    print(json.dumps({"device": dev, "torch": torch.__version__, "rounds": args.rounds,
                      "inductor_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}), flush=True)
    torch.manual_seed(0)
    if args.compile_time:
        if cuda:
            compile_time(dev, sync)
        return
    # The cheap rows first: a run stopped by its time limit keeps what it printed (bench_io.run).
    for name, model, loss_fn, lr, n in graph_steps(dev):
        print(json.dumps(graph_step_row(name, model, loss_fn, lr, n, args.rounds, sync)), flush=True)
    with torch.no_grad():
        for name, fn, fargs in works(dev):
            print(json.dumps(bench_row(name, fn, fargs, iters, args.rounds, sync)), flush=True)
        if cuda:
            print(json.dumps(launches(dev)), flush=True)
        with torch.autocast("cuda", dtype=torch.bfloat16) if cuda else contextlib.nullcontext():
            for name, fn, fargs, n in inference_works(dev):
                print(json.dumps(bench_row(name, fn, fargs, n, args.rounds, sync, mode="default")), flush=True)


if __name__ == "__main__":
    main()
