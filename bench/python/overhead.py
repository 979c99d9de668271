#!/usr/bin/env python3
"""Python-side overhead per small op: 1000 dependent adds on 1024 floats, tessera from Python against
PyTorch eager from Python, on the CPU (and, with --device cuda, the GPU). Median and min-max of
alternating rounds (tessera in this process, PyTorch in a process of its own per round under --python:
sides.py); writes bench/results/python-overhead-<device>.json whole, with the raw samples.
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


def torch_round(device):
    import torch
    torch.set_num_threads(1)
    print(json.dumps({"us_per_op": run(torch, device), "torch": torch.__version__}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--python", default=sides.default_python(), help="the interpreter of the PyTorch side")
    p.add_argument("--torch-round", action="store_true", help=argparse.SUPPRESS)  # one PyTorch round (a worker)
    args = p.parse_args()
    if args.torch_round:
        return torch_round(args.device)

    import tessera as ts
    ts.set_num_threads(1)
    tsv, tov, version = [], [], None
    for _ in range(args.rounds):
        tsv.append(run(ts, args.device))
        r = sides.worker(args.python, __file__, ["--torch-round", "--device", args.device])
        tov.append(r["us_per_op"])
        version = r["torch"]
    t, r = statistics.median(tsv), statistics.median(tov)
    suite = f"python-overhead-{args.device}"
    out = sides.header(suite, args.device, args.rounds, version)
    out["rows"] = [{"work": "1000 dependent adds, 1024 float32, from Python", "unit": "us/op", "tessera": t,
                    "tessera_min": min(tsv), "tessera_max": max(tsv), "reference": "torch eager (Python)",
                    "reference_value": r, "ratio": r / t, "target": 1.0, "meets": r / t >= 1.0,
                    "torch_eager": r, "torch_min": min(tov), "torch_max": max(tov), "samples_tessera": tsv,
                    "samples_torch": tov}]
    sides.write(suite, out)
    print(json.dumps(out["rows"][0], indent=1))


if __name__ == "__main__":
    main()
