#!/usr/bin/env python3
"""The work of bench/cuda/bench_cuda_graph.cpp in PyTorch, under the same row names: a 200-op step
eager and replayed from torch.cuda.graph, and the MLP 784-512-512-10 (batch 128, SGD momentum, float32)
training step eager and as one captured graph (PyTorch's whole-network capture recipe). One JSON object
per line: {"name": ..., "unit": ..., "value": ...}. Timing as the C++ side: CUDA events around --iters
back-to-back steps after warm-up, median over --runs.
"""
import argparse
import json
import statistics

import torch


def ms_per_call(fn, runs, iters):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(runs):
        start.record()
        for _ in range(iters):
            fn()
        stop.record()
        stop.synchronize()
        t.append(start.elapsed_time(stop) / iters)
    return statistics.median(t)


def emit(name, unit, value):
    print(json.dumps({"name": name, "unit": unit, "value": value}), flush=True)


def step200(x):
    y = x
    for _ in range(100):
        y = y * 1.0001 + 0.0001
    return y


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--iters", type=int, default=50)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")

    x = torch.randn(1024, device=dev)
    emit("step200_eager", "ms", ms_per_call(lambda: step200(x), a.runs, a.iters))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step200(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step200(x)
    emit("step200_graph", "ms", ms_per_call(g.replay, a.runs, a.iters))

    xb = torch.randn(128, 784, device=dev)
    yb = torch.randint(0, 10, (128,), device=dev)
    loss_fn = torch.nn.CrossEntropyLoss()

    net = mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(xb), yb)
        loss.backward()
        opt.step()
        return loss

    emit("mlp_784_512_512_10_b128_sgd_eager", "steps/s", 1000.0 / ms_per_call(step, a.runs, a.iters))

    net = mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = step()
    emit("mlp_784_512_512_10_b128_sgd_graph", "steps/s", 1000.0 / ms_per_call(g.replay, a.runs, a.iters))


if __name__ == "__main__":
    main()
