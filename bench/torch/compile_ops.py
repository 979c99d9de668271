"""The codegen rows of bench/compile/bench_compile.cpp in PyTorch: the same programs (a 12-op pointwise
chain with a broadcast, softmax, residual add + layer norm, RMS norm), shapes and dtype (float32),
forward under no_grad, in eager and under torch.compile (Inductor, mode max-autotune-no-cudagraphs:
its autotuned Triton kernels without CUDA graphs, which the tessera rows do not use either).

Timing as bench_compile's: per round, `iters` calls timed by the host clock around a synchronize;
the rows print every round's figure. One JSON object per line:
{"name", "unit": "ms", "eager_samples", "compile_samples", "compile_s"} (compile_s: the first
compiled call, compile included). usage: compile_ops.py [--device cuda] [--rounds 5]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F


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


def timed(fn, args, iters, sync):
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn(*args)
    sync()
    return (time.perf_counter() - t0) * 1000.0 / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    dev = args.device
    sync = torch.cuda.synchronize if dev.startswith("cuda") else (lambda: None)
    iters = 50 if dev.startswith("cuda") else 3
    print(json.dumps({"device": dev, "torch": torch.__version__, "rounds": args.rounds}), flush=True)
    with torch.no_grad():
        for name, fn, fargs in works(dev):
            row = {"name": name, "unit": "ms"}
            try:
                compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs")
                sync()
                t0 = time.perf_counter()
                compiled(*fargs)
                sync()
                row["compile_s"] = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001 - a failed compile is reported, not fatal
                compiled, row["compile_error"] = None, str(e)[:300]
            fn(*fargs)
            e, c = [], []
            for _ in range(args.rounds):
                if compiled is not None:
                    c.append(timed(compiled, fargs, iters, sync))
                e.append(timed(fn, fargs, iters, sync))
            row["eager_samples"], row["compile_samples"] = e, c or None
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
