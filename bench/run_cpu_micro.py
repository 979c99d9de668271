#!/usr/bin/env python3
"""Runs tessera's CPU micro-benchmarks and the same work in PyTorch on this machine, same thread count,
alternating rounds, and writes bench/results/cpu-micro.json in DESIGN.md's format.

ratio = PyTorch time / tessera time (higher is better for tessera); target from the foundation issue.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGETS = {  # work -> (tessera benchmark name, issue target)
    "add_f32_16M": ("BM_add_f32_16M", 1.0),
    "mul_f32_16M": ("BM_mul_f32_16M", 1.0),
    "gelu_f32_16M": ("BM_gelu_f32_16M", 1.0),
    "sum_f32_16M": ("BM_sum_f32_16M", 1.0),
    "softmax_f32_4096x1024": ("BM_softmax_f32_4096x1024", 1.0),
    "matmul_f32_1024": ("BM_matmul_f32_1024", 0.9),
    "train_step_mlp_b128": ("BM_train_step_mlp_b128", 1.0),
    "train_step_cnn_b64": ("BM_train_step_cnn_b64", 1.0),
}


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown cpu"


def run_tessera(binary, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    names = "|".join(v[0] for v in TARGETS.values())
    out = subprocess.run([binary, f"--benchmark_filter=^({names})(/real_time)?$", "--benchmark_format=json",
                          "--benchmark_repetitions=5", "--benchmark_report_aggregates_only=true"],
                         env=env, check=True, capture_output=True, text=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b["time_unit"]]
            res[b["run_name"].split("/")[0]] = b["real_time"] * scale
    return res


def run_torch(threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench/torch/cpu_micro.py"),
                          "--threads", str(threads)], env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/cpu-micro.json"))
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench/bench_cpu_micro")
    ts_runs, pt_runs = [], []
    for r in range(args.rounds):  # alternate so that machine noise hits both sides alike
        ts_runs.append(run_tessera(binary, args.threads))
        pt_runs.append(run_torch(args.threads))
    commit = commit_id(ROOT)
    torch_version = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    rows = []
    print(f"{'work':26s} {'tessera ms':>11s} {'torch ms':>10s} {'ratio':>7s} {'target':>7s}")
    for work, (bm, target) in TARGETS.items():
        t = statistics.median(run[bm] for run in ts_runs if bm in run)
        p = statistics.median(run[work] for run in pt_runs)
        ratio = p / t
        rows.append({"work": work.replace("_", " "), "unit": "ms", "tessera": round(t * 1e3, 4),
                     "reference": f"torch {torch_version} eager, {args.threads} threads",
                     "reference_value": round(p * 1e3, 4), "ratio": round(ratio, 3), "target": target,
                     "meets": ratio >= target, "torch_eager": round(p * 1e3, 4), "torch_compile": None,
                     "peak_mem_gib": None})
        print(f"{work:26s} {t * 1e3:11.3f} {p * 1e3:10.3f} {ratio:7.3f} {target:7.2f}")
    doc = {"suite": "cpu-micro", "device": "cpu", "cpu": cpu_name(), "threads": args.threads,
           "driver": None, "commit": commit, "date": datetime.date.today().isoformat(), "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}")
    return 0 if all(r["meets"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
