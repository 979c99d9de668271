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


def mlp():
    nn = torch.nn
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def cnn():
    nn = torch.nn
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10))


def train_step_case(model, batch, g):
    """One SGD-with-momentum step (zero_grad, forward, cross_entropy, backward, step) on fixed inputs,
    run with autograd on (the other cases run under no_grad)."""
    x = torch.randn(batch, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (batch,), generator=g)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        with torch.enable_grad():
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
    return step


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
        "train_step_mlp_b128": train_step_case(mlp(), 128, g),
        "train_step_cnn_b64": train_step_case(cnn(), 64, g),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--filter", default="", help="run only the cases whose name contains this")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with torch.no_grad():
        res = {name: timeit(fn, args.min_time) for name, fn in cases().items() if args.filter in name}
    print(json.dumps(res))


if __name__ == "__main__":
    main()
