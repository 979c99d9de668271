#!/usr/bin/env python3
"""The work of bench/cuda/bench_cuda_graph.cpp in PyTorch, under the same row names: a 200-op step
eager and replayed from torch.cuda.graph, and the MLP 784-512-512-10 (batch 128, SGD momentum, float32)
training step eager and as one captured graph (PyTorch's whole-network capture recipe). One JSON object
per line, as the C++ side prints them: {"name", "unit", "value", "ms", "iters", "samples_ms"} (value: ms
per step, or 1000 / ms in steps/s), or {"name", "unit", "value": null, "error"} where the work raised;
the run goes on. Timing as the C++ side: CUDA events around --iters back-to-back steps after warm-up,
one sample per measurement, --runs of them, "ms" their median. bench/run_amp_graphs.py runs it.
"""
import argparse
import json
import statistics
import sys

import torch

OPT = None


def ms_per_call(fn):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = []
    for _ in range(OPT.runs):
        start.record()
        for _ in range(OPT.iters):
            fn()
        stop.record()
        stop.synchronize()
        t.append(start.elapsed_time(stop) / OPT.iters)
    return t


def emit(name, unit, samples):
    ms = statistics.median(samples)
    value = 1000.0 / ms if unit == "steps/s" else ms
    print(json.dumps({"name": name, "unit": unit, "value": value, "ms": ms, "iters": OPT.iters,
                      "samples_ms": samples}), flush=True)


def rows(names, unit, fn):
    """Runs fn, which emits its rows (done counts them); where it raises, an error row for each name it had
    not printed."""
    done = [0]
    try:
        fn(done)
    except Exception as e:
        for name in names[done[0]:]:
            print(json.dumps({"name": name, "unit": unit, "value": None, "error": f"{type(e).__name__}: {e}"}),
                  flush=True)


def step200(x):
    y = x
    for _ in range(100):
        y = y * 1.0001 + 0.0001
    return y


def mlp():
    return torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()


def bench_step200(done):
    x = torch.randn(1024, device="cuda")
    emit("step200_eager", "ms/step", ms_per_call(lambda: step200(x)))
    done[0] += 1
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step200(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step200(x)  # noqa: F841 (the graph's output stays alive while it replays)
    emit("step200_graph", "ms/step", ms_per_call(g.replay))
    done[0] += 1


def trainer():
    xb = torch.randn(128, 784, device="cuda")
    yb = torch.randint(0, 10, (128,), device="cuda")
    loss_fn = torch.nn.CrossEntropyLoss()
    net = mlp()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(net(xb), yb)
        loss.backward()
        opt.step()
        return loss
    return step, opt


def bench_mlp_eager(done):
    step, _ = trainer()
    emit("mlp_784_512_512_10_b128_sgd_eager", "steps/s", ms_per_call(step))
    done[0] += 1


def bench_mlp_graph(done):
    step, opt = trainer()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = step()  # noqa: F841 (the graph's output stays alive while it replays)
    emit("mlp_784_512_512_10_b128_sgd_graph", "steps/s", ms_per_call(g.replay))
    done[0] += 1


def main():
    global OPT
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--iters", type=int, default=50)
    OPT = ap.parse_args()
    if not torch.cuda.is_available():
        print("cuda_graph.py: PyTorch sees no CUDA GPU", file=sys.stderr)
        return 3
    torch.manual_seed(0)
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)
    rows(["step200_eager", "step200_graph"], "ms/step", bench_step200)
    rows(["mlp_784_512_512_10_b128_sgd_eager"], "steps/s", bench_mlp_eager)
    rows(["mlp_784_512_512_10_b128_sgd_graph"], "steps/s", bench_mlp_graph)
    return 0


if __name__ == "__main__":
    sys.exit(main())
