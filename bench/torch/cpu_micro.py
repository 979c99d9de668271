"""The CPU micro-benchmarks of bench/micro, in PyTorch: same shapes, dtypes and thread count.

Prints one JSON object {name: median seconds per iteration}. Each case times a warm-up, then batches
of iterations until at least `min_time` seconds have passed, and reports the median batch mean.
"""
import argparse
import json
import statistics
import time

import torch


def timeit(fn, min_time=0.5, batches=7):
    for _ in range(3):
        fn()
    # size a batch to about min_time / batches
    t0 = time.perf_counter(); fn(); one = max(time.perf_counter() - t0, 1e-7)
    iters = max(1, int(min_time / batches / one))
    means = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        means.append((time.perf_counter() - t0) / iters)
    return statistics.median(means)


def cases():
    g = torch.Generator().manual_seed(0)
    n = 16 * 1024 * 1024
    a = torch.randn(n, generator=g)
    b = torch.randn(n, generator=g)
    out = torch.empty(n)
    s = torch.randn(4096, 1024, generator=g)
    m1 = torch.randn(1024, 1024, generator=g)
    m2 = torch.randn(1024, 1024, generator=g)
    return {
        "add_f32_16M": lambda: torch.add(a, b, out=out),
        "mul_f32_16M": lambda: torch.mul(a, b, out=out),
        "gelu_f32_16M": lambda: torch.nn.functional.gelu(a),
        "sum_f32_16M": lambda: a.sum(),
        "softmax_f32_4096x1024": lambda: torch.softmax(s, -1),
        "matmul_f32_1024": lambda: torch.matmul(m1, m2),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=0.5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with torch.no_grad():
        res = {name: timeit(fn, args.min_time) for name, fn in cases().items()}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
