#!/usr/bin/env python3
"""Runs build/bench/bench_compile (ts::compile's capture time and per-call cost against eager) and writes
bench/results/compile-<device>.json in DESIGN.md's format, with every raw sample. Builds nothing.

Rows (ratio oriented so that higher is better for tessera; figures: median over the rounds, which
alternate graph calls and eager calls inside one process):
  capture <model> loss     the first call of the compiled program (ms), against one eager call of the
                           same program: ratio = eager / capture, no target (capture runs the program
                           once eagerly, so it is at least one eager call);
  call <model> loss+backward  one graph call and its backward (ms), against an eager call and its backward: ratio =
                           eager / graph, target 1.0 (the issue asks the executor to be faster than
                           eager dispatch); the row also gives the graph's node count and the overhead
                           per node in microseconds ((graph - eager) / nodes).
No PyTorch row: torch.compile is not on this machine's PyTorch (the CPU side has Debian's 1.13); the
GPU machine's run adds torch.compile's first-step time where it is measured.
usage: run_compile.py [--device cpu|cuda] [--rounds 5] [--build build]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id, gpu_info, run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = ap.parse_args()
    exe = os.path.join(args.build, "bench", "bench_compile")
    header, rows = run([exe, "--device", args.device, "--rounds", str(args.rounds)], "bench_compile", 3600,
                       announce=True)
    if not rows:
        print("bench_compile produced no rows", file=sys.stderr)
        return 2
    out_rows = []
    for name, r in rows.items():
        s, e = r["samples"], r["eager_samples"]
        med, emed = statistics.median(s), statistics.median(e)
        row = {"work": name, "unit": "ms", "tessera": med, "tessera_min": min(s), "tessera_max": max(s),
               "reference": "tessera eager (same program, same process)", "reference_value": emed,
               "reference_min": min(e), "reference_max": max(e), "ratio": emed / med,
               "nodes": r.get("nodes"), "kernels": r.get("kernels"), "fused_nodes": r.get("fused_nodes"), "samples": s, "reference_samples": e,
               "torch_eager": None, "torch_compile": None, "libtorch": None, "peak_mem_gib": None}
        if name.startswith("call"):
            row["target"] = 1.0
            row["meets"] = row["ratio"] >= 1.0
            # The spread decides: ratios from the extremes that overlap 1.0 are parity.
            lo, hi = min(e) / max(s), max(e) / min(s)
            row["verdict"] = "parity" if lo <= 1.0 <= hi else ("faster" if lo > 1.0 else "slower")
            if r.get("nodes"):
                row["overhead_us_per_node"] = (med - emed) * 1000.0 / r["nodes"]
        else:
            row["target"] = None
            row["meets"] = None
        out_rows.append(row)
    gpu, driver = gpu_info() if args.device.startswith("cuda") else (None, None)
    result = {"suite": f"compile-{args.device.split(':')[0]}", "device": gpu or "cpu", "cpu": cpu_name(),
              "driver": driver, "torch": None, "commit": commit_id(ROOT),
              "date": datetime.date.today().isoformat(), "rounds": args.rounds, "rows": out_rows}
    path = os.path.join(ROOT, "bench", "results", f"{result['suite']}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    for row in out_rows:
        extra = f" ({row['verdict']}, {row.get('overhead_us_per_node', 0):+.2f} us/node)" if "verdict" in row else ""
        print(f"{row['work']:28s} {row['tessera']:10.3f} ms  eager {row['reference_value']:10.3f} ms  "
              f"ratio {row['ratio']:.3f}{extra}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
