"""The kernels of one warm call of compile_ops.py's inference rows (ResNet-50 batch 256 channels-last,
GPT-2 124M's logits over 16 x 1024 tokens, bfloat16 autocast, no_grad), under torch.compile (default
mode, or --mode) and in eager, from torch.profiler: per kernel name its count, total and mean time,
sorted by total, then the call's wall time and the sum of its kernel times. bench_compile --profile
prints the same for tessera; reading the two side by side says where a gap to torch.compile lies. Not a
results file: one call, no rounds.
usage: profile_inference.py [--device cuda] [--mode default]
"""
import argparse
import os
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compile_ops  # noqa: E402


def print_kernels(title, fn, args):
    fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        t0 = time.perf_counter()
        fn(*args)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) * 1000.0
    rows = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            n, t = rows.get(e.name, (0, 0.0))
            rows[e.name] = (n + 1, t + e.device_time_total)
    total = sum(t for _, t in rows.values())
    launches = sum(n for n, _ in rows.values())
    print(f"== {title}: wall {wall:.3f} ms, kernels {total / 1000:.3f} ms in {launches} launches")
    for name, (n, t) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        print(f"  {n:5d}  {t / 1000:9.3f} ms  {t / n:9.1f} us  {100 * t / max(total, 1e-9):5.1f}%  {name[:150]}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--mode", default="default")
    args = ap.parse_args()
    torch.manual_seed(0)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        for name, fn, fargs, _ in compile_ops.inference_works(args.device):
            compiled = torch.compile(fn, mode=None if args.mode == "default" else args.mode)
            print_kernels(f"{name} [torch.compile {args.mode}]", compiled, fargs)
            print_kernels(f"{name} [eager]", fn, fargs)


if __name__ == "__main__":
    main()
