#!/usr/bin/env python3
"""Python-side overhead per small op: 1000 dependent adds on 1024 floats, tessera from Python against
PyTorch eager from Python, on the CPU (and, with --device cuda, the GPU). Alternating rounds (tessera
in this process, PyTorch in a process of its own per round under --python: sides.py), each timing
--reps runs of the 1000 adds per side; a round's figure is the median of its runs, the row's the
median of the rounds with their min-max, and the ratio's spread pairs the extreme round figures: a
spread that holds 1.0 is "parity" (DESIGN.md, "Performance method"), and the target (lower than
PyTorch's) is met only where tessera is faster beyond it. Writes
bench/results/python-overhead-<device>.json whole, with every run's figure.
Run: PYTHONPATH=build/python /usr/bin/python3 bench/python/overhead.py [--device cuda] [--rounds 5]
     [--python /opt/torch/.venv/bin/python3]"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sides  # noqa: E402


def run(lib, device, n=1000):
    import time
    a = lib.randn(1024, device=device)
    b = lib.randn(1024, device=device)
    sync = (lambda: lib.cuda.synchronize()) if device == "cuda" else (lambda: None)
    for _ in range(100):
        a = a + b
    sync()
    t0 = time.perf_counter()
    for _ in range(n):
        a = a + b
    sync()
    return (time.perf_counter() - t0) / n * 1e6  # us per op


def runs(lib, device, reps):
    return [run(lib, device) for _ in range(reps)]


def torch_round(device, reps):
    import torch
    torch.set_num_threads(1)
    print(json.dumps({"us_per_op": runs(torch, device, reps), "torch": torch.__version__}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--reps", type=int, default=5, help="runs of the 1000 adds per side and round")
    p.add_argument("--python", default=sides.default_python(), help="the interpreter of the PyTorch side")
    p.add_argument("--torch-round", action="store_true", help=argparse.SUPPRESS)  # one PyTorch round (a worker)
    args = p.parse_args()
    if args.torch_round:
        return torch_round(args.device, args.reps)

    import tessera as ts
    ts.set_num_threads(1)
    tsv, tov, version = [], [], None
    for _ in range(args.rounds):
        tsv.append(runs(ts, args.device, args.reps))
        r = sides.worker(args.python, __file__, ["--torch-round", "--device", args.device, "--reps", str(args.reps)])
        tov.append(r["us_per_op"])
        version = r["torch"]
    tr = [statistics.median(x) for x in tsv]  # each round's figure
    orr = [statistics.median(x) for x in tov]
    t, r = statistics.median(tr), statistics.median(orr)
    lo, hi = min(orr) / max(tr), max(orr) / min(tr)
    verdict = sides.verdict(lo, hi)
    suite = f"python-overhead-{args.device}"
    out = sides.header(suite, args.device, args.rounds, version)
    out["reps"] = args.reps
    out["rows"] = [{"work": "1000 dependent adds, 1024 float32, from Python", "unit": "us/op", "tessera": t,
                    "tessera_min": min(tr), "tessera_max": max(tr), "reference": "torch eager (Python)",
                    "reference_value": r, "ratio": r / t, "ratio_min": lo, "ratio_max": hi, "verdict": verdict,
                    "target": 1.0, "meets": verdict == "faster",
                    "torch_eager": r, "torch_min": min(orr), "torch_max": max(orr), "samples_tessera": tsv,
                    "samples_torch": tov}]
    sides.write(suite, out)
    print(json.dumps(out["rows"][0], indent=1))


if __name__ == "__main__":
    main()
