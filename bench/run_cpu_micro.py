#!/usr/bin/env python3
"""Runs tessera's CPU micro-benchmarks and the same work in PyTorch on this machine, same thread count,
alternating rounds, and writes bench/results/cpu-micro.json in DESIGN.md's format.

ratio = PyTorch time / tessera time (higher is better for tessera); target 1.0 everywhere (issue 27).
The file names the CPU, the instruction sets tessera found on it, the level its CPU kernels chose
and whether oneDNN was on (all from `tessera info`). Each round runs tessera at the chosen level,
then at each instruction-set level the CPU supports (TESSERA_CPU_ISA capped), then PyTorch; the rows
are the chosen level's, `levels` holds every level's figures, and every sample is kept (a sample is
the median of one round's repetitions).
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
TARGETS = {  # work -> (tessera benchmark name, target: issue 27 asks every row >= 1.0)
    "add_f32_16M": ("BM_add_f32_16M", 1.0),
    "mul_f32_16M": ("BM_mul_f32_16M", 1.0),
    "gelu_f32_16M": ("BM_gelu_f32_16M", 1.0),
    "sum_f32_16M": ("BM_sum_f32_16M", 1.0),
    "softmax_f32_4096x1024": ("BM_softmax_f32_4096x1024", 1.0),
    "matmul_f32_1024": ("BM_matmul_f32_1024", 1.0),
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


LEVELS = ["baseline", "avx2", "avx512"]


def tessera_info(build, cap=None):
    """CPU name, features, chosen level, supported level and the oneDNN line from `tessera info`."""
    env = dict(os.environ)
    if cap:
        env["TESSERA_CPU_ISA"] = cap
    exe = os.path.join(build, "apps/tessera")
    info = {"cpu": None, "features": [], "level": None, "supported": None, "onednn": None}
    try:
        out = subprocess.run([exe, "info"], env=env, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return info
    for line in out.splitlines():
        if line.startswith("CPU: "):
            info["cpu"] = line[5:].rsplit(" (", 1)[0]
        elif line.startswith("CPU features: "):
            info["features"] = line[len("CPU features: "):].split()
        elif line.startswith("CPU kernels: "):
            rest = line[len("CPU kernels: "):]
            info["level"] = rest.split()[0]
            info["supported"] = rest.split("supported: ", 1)[1].split(",")[0].rstrip(")")
        elif line.startswith("oneDNN"):
            info["onednn"] = line
    return info


def run_tessera(binary, threads, cap=None):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    if cap:
        env["TESSERA_CPU_ISA"] = cap
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


def summary(samples):
    return {"median": round(statistics.median(samples) * 1e3, 4), "min": round(min(samples) * 1e3, 4),
            "max": round(max(samples) * 1e3, 4), "samples_ms": [round(x * 1e3, 4) for x in samples]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-levels", action="store_true", help="only the chosen level")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/cpu-micro.json"))
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench/bench_cpu_micro")
    info = tessera_info(args.build)
    supported = info["supported"] or "baseline"
    levels = [] if args.no_levels else LEVELS[:LEVELS.index(supported) + 1]
    ts_runs, pt_runs = [], []
    level_runs = {lv: [] for lv in levels}
    for r in range(args.rounds):  # alternate so that machine noise hits both sides alike
        ts_runs.append(run_tessera(binary, args.threads))
        for lv in levels:
            level_runs[lv].append(run_tessera(binary, args.threads, cap=lv))
        pt_runs.append(run_torch(args.threads))
    commit = commit_id(ROOT)
    torch_version = subprocess.run(["/usr/bin/python3", "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    rows = []
    print(f"{'work':26s} {'tessera ms':>11s} {'torch ms':>10s} {'ratio':>7s} {'range':>13s} {'target':>7s}")
    for work, (bm, target) in TARGETS.items():
        ts_s = [run[bm] for run in ts_runs if bm in run]
        pt_s = [run[work] for run in pt_runs]
        t, p = statistics.median(ts_s), statistics.median(pt_s)
        ratio = p / t
        lo, hi = min(pt_s) / max(ts_s), max(pt_s) / min(ts_s)
        rows.append({"work": work.replace("_", " "), "unit": "ms", "tessera": round(t * 1e3, 4),
                     "tessera_min": round(min(ts_s) * 1e3, 4), "tessera_max": round(max(ts_s) * 1e3, 4),
                     "reference": f"torch {torch_version} eager, {args.threads} threads",
                     "reference_value": round(p * 1e3, 4), "ratio": round(ratio, 3), "ratio_min": round(lo, 3),
                     "ratio_max": round(hi, 3), "target": target, "meets": ratio >= target,
                     "torch_eager": round(p * 1e3, 4), "torch_min": round(min(pt_s) * 1e3, 4),
                     "torch_max": round(max(pt_s) * 1e3, 4), "torch_compile": None, "peak_mem_gib": None,
                     "samples_ms": {"tessera": [round(x * 1e3, 4) for x in ts_s],
                                    "torch": [round(x * 1e3, 4) for x in pt_s]}})
        print(f"{work:26s} {t * 1e3:11.3f} {p * 1e3:10.3f} {ratio:7.3f} {lo:6.2f}-{hi:<6.2f} {target:7.2f}")
    level_doc = {}
    if levels:
        print(f"\n{'work':26s} " + " ".join(f"{lv + ' ms':>13s}" for lv in levels))
    for lv in levels:
        level_doc[lv] = {work.replace("_", " "): summary([run[bm] for run in level_runs[lv] if bm in run])
                         for work, (bm, _) in TARGETS.items()}
    for work in TARGETS:
        if levels:
            print(f"{work:26s} " + " ".join(f"{level_doc[lv][work.replace('_', ' ')]['median']:13.3f}"
                                            for lv in levels))
    doc = {"suite": "cpu-micro", "device": "cpu", "cpu": info["cpu"] or cpu_name(),
           "cpu_features": info["features"], "cpu_level": info["level"], "cpu_level_supported": info["supported"],
           "onednn": info["onednn"], "threads": args.threads, "driver": None, "torch": torch_version,
           "commit": commit, "date": datetime.date.today().isoformat(), "rounds": args.rounds, "rows": rows,
           "levels": level_doc}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}")
    return 0 if all(r["meets"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
