#!/usr/bin/env python3
"""DistributedDataParallel's overhead at world size 1 on this machine's GPU: runs tessera's
build/bench/bench_ddp and PyTorch's bench/torch/ddp.py (the same GPT-2 124M step, plain and wrapped in
DDP over nccl) in alternating processes, --rounds of each, and writes bench/results/ddp-cuda.json whole
(DESIGN.md's format, with every raw sample). Builds nothing.

The overhead of a pair is ddp_ms / plain_ms - 1 for the plain and DDP timings taken back to back in one
process; the row gives the median over every pair and its spread (min, max). A spread that holds 0 is
"no measurable overhead"; the target is |median| <= 1%.
Exit status: 0 when tessera's overhead meets the target, 1 when not, 2 when tessera's side did not run.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id, gpu_info  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pairs(outs):
    """Every (plain_ms, ddp_ms) round of every process, and the summaries."""
    rounds, summaries = [], []
    for text in outs:
        for line in text.splitlines():
            if line.startswith("{"):
                obj = json.loads(line)
                if "round" in obj:
                    rounds.append(obj)
                elif "summary" in obj:
                    summaries.append(obj["summary"])
    return rounds, summaries


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=3, help="processes per side, alternating")
    ap.add_argument("--inner", type=int, default=3, help="plain/DDP pairs per process")
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    common = ["--rounds", str(a.inner), "--iters", str(a.iters)]
    raw = {"tessera": [], "torch": []}
    for r in range(a.rounds):
        for name, cmd in (("tessera", [os.path.join(a.build, "bench", "bench_ddp")] + common),
                          ("torch", [a.python, os.path.join(ROOT, "bench", "torch", "ddp.py")] + common)):
            print(f"==> round {r}: {name}", file=sys.stderr, flush=True)
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if p.returncode != 0:
                print(f"{name}: exit status {p.returncode}\n{p.stderr[-3000:]}", file=sys.stderr)
            raw[name].append(p.stdout)

    def row(name):
        rounds, summaries = pairs(raw[name])
        if not rounds:
            return None
        over = [100.0 * (x["ddp_ms"] / x["plain_ms"] - 1.0) for x in rounds]
        return {"plain_ms_median": statistics.median(x["plain_ms"] for x in rounds),
                "ddp_ms_median": statistics.median(x["ddp_ms"] for x in rounds),
                "overhead_pct_median": statistics.median(over), "overhead_pct_min": min(over),
                "overhead_pct_max": max(over), "pairs": rounds, "summaries": summaries}

    ts, pt = row("tessera"), row("torch")
    gpu, driver = gpu_info()
    verdict = None
    if ts:
        holds_zero = ts["overhead_pct_min"] <= 0.0 <= ts["overhead_pct_max"]
        verdict = ("no measurable overhead (the spread holds 0)" if holds_zero else
                   f"overhead {ts['overhead_pct_median']:.2f}% (spread {ts['overhead_pct_min']:.2f} to "
                   f"{ts['overhead_pct_max']:.2f}%)")
    doc = {"suite": "ddp", "device": gpu, "driver": driver, "commit": commit_id(ROOT),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "work": "GPT-2 124M training step, batch 16 x 1024, bf16 autocast, clip 1.0, fused AdamW; "
                   "DistributedDataParallel over nccl at world size 1 against the same step unwrapped",
           "rounds": a.rounds, "pairs_per_process": a.inner, "iters": a.iters, "target_abs_overhead_pct": 1.0,
           "tessera": ts, "torch_eager": pt, "verdict": verdict}
    path = os.path.join(ROOT, "bench", "results", "ddp-cuda.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    for name, r in (("tessera", ts), ("torch eager", pt)):
        if r:
            print(f"{name:12s} plain {r['plain_ms_median']:.3f} ms  DDP {r['ddp_ms_median']:.3f} ms  overhead "
                  f"{r['overhead_pct_median']:+.2f}% [{r['overhead_pct_min']:+.2f}, {r['overhead_pct_max']:+.2f}]")
    print(f"verdict: {verdict}; wrote {path}")
    if not ts:
        return 2
    return 0 if abs(ts["overhead_pct_median"]) <= 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
