"""bench/micro/bench_conv.cpp's work in PyTorch: same shapes, float32, same thread count.

Prints one JSON object {benchmark name: median (or, with --best, fastest) seconds per iteration}, with the tessera benchmark
names, so that the two outputs compare line by line.
Run: /usr/bin/python3 bench/torch/conv_micro.py --threads 2
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F


def timeit(fn, min_time=1.0, batches=7, stat=statistics.median):
    for _ in range(3):
        fn()
    t0 = time.perf_counter(); fn(); one = max(time.perf_counter() - t0, 1e-7)
    iters = max(1, int(min_time / batches / one))
    means = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        means.append((time.perf_counter() - t0) / iters)
    return stat(means)


def cases():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)
    x = r(64, 32, 28, 28); w = r(64, 32, 3, 3); b = r(64)
    xg = x.clone().requires_grad_(); wg = w.clone().requires_grad_(); bg = b.clone().requires_grad_()
    gy = r(64, 64, 28, 28)
    x2 = r(64, 32, 26, 26).requires_grad_(); gy2 = r(64, 64, 24, 24)
    x1 = r(64, 1, 28, 28); w1 = r(32, 1, 3, 3).requires_grad_(); b1 = r(32).requires_grad_(); gy1 = r(64, 32, 26, 26)
    xp = r(64, 64, 24, 24).requires_grad_(); gyp = r(64, 64, 12, 12)

    def fwd():
        with torch.no_grad():
            F.conv2d(x, w, b, 1, 1)

    def fwd_bwd():
        y = F.conv2d(xg, wg, bg, 1, 1)
        torch.autograd.grad(y, [xg, wg, bg], gy)

    def fwd_bwd_26():
        y = F.conv2d(x2, wg, bg)
        torch.autograd.grad(y, [x2, wg, bg], gy2)

    def fwd_bwd_first():
        y = F.conv2d(x1, w1, b1)
        torch.autograd.grad(y, [w1, b1], gy1)

    def pool():
        y = F.max_pool2d(xp, 2)
        torch.autograd.grad(y, [xp], gyp)

    return {
        "BM_conv2d_f32_64x32x28x28": fwd,
        "BM_conv2d_f32_64x32x28x28_fwd_bwd": fwd_bwd,
        "BM_conv2d_f32_64x32x26x26_fwd_bwd": fwd_bwd_26,
        "BM_conv2d_f32_64x1x28x28_fwd_bwd": fwd_bwd_first,
        "BM_max_pool2d_f32_64x64x24x24_fwd_bwd": pool,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--best", action="store_true", help="report the fastest batch instead of the median (busy machines)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    stat = min if args.best else statistics.median
    print(json.dumps({name: timeit(fn, args.min_time, stat=stat) for name, fn in cases().items()}))


if __name__ == "__main__":
    main()
