#!/usr/bin/env python3
"""Python-side overhead per small op: 1000 dependent adds on 1024 floats, tessera from Python against
PyTorch eager from Python, on the CPU (and, with --device cuda, the GPU). Median and min-max of
alternating rounds; writes bench/results/python-overhead-<device>.json whole.
Run: PYTHONPATH=build/python /usr/bin/python3 bench/python/overhead.py [--device cuda] [--rounds 5]"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import time

import torch

import tessera as ts


def run(lib, device, n=1000):
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    ts.set_num_threads(1)
    tsv, tov = [], []
    for _ in range(args.rounds):
        tsv.append(run(ts, args.device))
        tov.append(run(torch, args.device))
    t, r = statistics.median(tsv), statistics.median(tov)
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    commit = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    out = {"suite": f"python-overhead-{args.device}", "device": args.device if args.device == "cuda" else "cpu",
           "cpu": platform.processor() or platform.machine(), "torch": torch.__version__, "commit": commit,
           "date": datetime.date.today().isoformat(), "rounds": args.rounds,
           "rows": [{"work": "1000 dependent adds, 1024 float32, from Python", "unit": "us/op", "tessera": t,
                     "tessera_min": min(tsv), "tessera_max": max(tsv), "reference": "torch eager (Python)",
                     "reference_value": r, "ratio": r / t, "target": 1.0, "meets": r / t >= 1.0,
                     "torch_eager": r, "torch_min": min(tov), "torch_max": max(tov), "samples_tessera": tsv,
                     "samples_torch": tov}]}
    path = os.path.join(root, "bench", "results", f"python-overhead-{args.device}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out["rows"][0], indent=1))


if __name__ == "__main__":
    main()
