#!/usr/bin/env python3
"""The MLP training step from Python against the same step in C++: one SGD-with-momentum step
(zero_grad, forward, cross_entropy, backward, step) of the MLP 784-512-512-10 on a batch of 128, the
step of bench/micro/bench_train_step.cpp (BM_train_step_mlp_b128, run through bench_cpu_micro). The
three sides alternate in each round: tessera from Python (this process), tessera from C++ (the
benchmark executable, Google Benchmark's real time per iteration) and PyTorch eager from Python (a
process of its own under --python: sides.py). Every side runs on --threads threads (default 1:
OMP_NUM_THREADS and OPENBLAS_NUM_THREADS for the processes, set_num_threads in each library), since
on a shared machine a second thread measures the neighbours (Note [Threads of the step benchmark]).
Median and min-max of the rounds; writes bench/results/python-train-step-cpu.json whole, with the raw
samples.

Note [Threads of the step benchmark]: on the 2-core development machine loaded by other builds (load
average 3.8), the C++ step took 116 ms with tessera's default two OpenMP threads and 5.0 ms with one
(its optimizer step alone 24 ms against 0.11 ms): threads that wait at OpenMP barriers for a core
that a neighbour holds. One thread per side is what such a machine can measure; a quiet machine can
take --threads 2.
Run: PYTHONPATH=build/python /usr/bin/python3 bench/python/train_step.py [--rounds 5] [--build build]"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sides  # noqa: E402

BATCH, STEPS, WARMUP = 128, 40, 3


def python_round(lib):
    """Milliseconds per training step, with `lib` tessera or torch (the same script for both)."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = lib.randn(BATCH, 1, 28, 28), lib.randint(0, 10, (BATCH,))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    for _ in range(WARMUP):  # the momentum buffers and the allocator's caches exist, as in a training loop
        step()
    t0 = time.perf_counter()
    for _ in range(STEPS):
        step()
    return (time.perf_counter() - t0) / STEPS * 1e3


def thread_env(threads):
    return dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))


def cxx_round(exe, threads):
    out = subprocess.run([exe, "--benchmark_filter=^BM_train_step_mlp_b128/real_time$", "--benchmark_format=json",
                          "--benchmark_min_time=0.3"], capture_output=True, text=True, check=True,
                         env=thread_env(threads)).stdout
    b = json.loads(out)["benchmarks"][0]
    assert b["time_unit"] == "ms", b
    return b["real_time"]


def torch_round(threads):
    import torch
    torch.set_num_threads(threads)
    print(json.dumps({"ms_per_step": python_round(torch), "torch": torch.__version__,
                      "threads": torch.get_num_threads()}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--build", default=os.path.join(sides.ROOT, "build"))
    p.add_argument("--python", default=sides.default_python(), help="the interpreter of the PyTorch side")
    p.add_argument("--torch-round", action="store_true", help=argparse.SUPPRESS)  # one PyTorch round (a worker)
    args = p.parse_args()
    if args.torch_round:
        return torch_round(args.threads)

    os.environ.update(thread_env(args.threads))  # before tessera (and its OpenMP and OpenBLAS) loads
    import tessera as ts
    ts.set_num_threads(args.threads)
    exe = os.path.join(args.build, "bench", "bench_cpu_micro")
    if not os.path.exists(exe):
        sys.exit(f"{exe} is not built: cmake --build {args.build} --target bench_cpu_micro")
    py, cxx, to, version, torch_threads = [], [], [], None, None
    for _ in range(args.rounds):
        py.append(python_round(ts))
        cxx.append(cxx_round(exe, args.threads))
        r = sides.worker(args.python, __file__, ["--torch-round", "--threads", str(args.threads)],
                         env=thread_env(args.threads))
        to.append(r["ms_per_step"])
        version, torch_threads = r["torch"], r["threads"]
    t, c, o = statistics.median(py), statistics.median(cxx), statistics.median(to)
    suite = "python-train-step-cpu"
    out = sides.header(suite, "cpu", args.rounds, version)
    out["threads"] = {"tessera": ts.get_num_threads(), "torch": torch_threads}
    out["rows"] = [{"work": "MLP 784-512-512-10 b128 SGD-momentum training step, from Python", "unit": "ms",
                    "tessera": t, "tessera_min": min(py), "tessera_max": max(py),
                    "reference": "tessera from C++ (bench_cpu_micro BM_train_step_mlp_b128)", "reference_value": c,
                    "reference_min": min(cxx), "reference_max": max(cxx), "ratio": c / t, "target": None,
                    "meets": None, "torch_eager": o, "torch_min": min(to), "torch_max": max(to),
                    "torch_compile": None, "libtorch": None, "samples_tessera": py, "samples_cxx": cxx,
                    "samples_torch": to}]
    sides.write(suite, out)
    print(json.dumps(out["rows"][0], indent=1))


if __name__ == "__main__":
    main()
