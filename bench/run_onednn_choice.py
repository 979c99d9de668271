#!/usr/bin/env python3
"""Times the shape classes of Note [oneDNN where it wins] (bench/micro/bench_onednn.cpp) on the native
CPU kernels (TESSERA_ONEDNN=0), on oneDNN wherever it has a kernel (TESSERA_ONEDNN=all) and under the
rule the library ships (TESSERA_ONEDNN=1), in alternating rounds on the same thread count, and writes
bench/results/onednn-choice.json (medians, min-max and every sample).

speedup = native time / oneDNN time (above 1: oneDNN faster), of the medians; best = the same of the
fastest samples, the figure least disturbed by other work on a shared machine. The rule should pick
oneDNN where both lie above 1 (`wins`).

The memory-bound classes (pooling, batch norm) report the bytes they must move at least (the
benchmark's `bytes` counter); the control row (a float32 copy, the same code in every mode) gives the
copy bandwidth, written as `copy_gbps` in the header, and each such row's `floor_ms` is its bytes at
that bandwidth: the time neither path can beat.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = {"native": "0", "onednn": "all", "rule": "1"}


def cpu_name():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown cpu"


def run(binary, mode, threads, filt, min_time):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS="1", TESSERA_ONEDNN=MODES[mode])
    out = subprocess.run([binary, f"--benchmark_filter={filt}", "--benchmark_format=json",
                          f"--benchmark_min_time={min_time}"], env=env, check=True, capture_output=True,
                         text=True).stdout
    times, counted = {}, {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        name = b["run_name"].split("/")[0]
        times[name] = b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
        if "bytes" in b:
            counted[name] = b["bytes"]
    BYTES.update(counted)
    return times


BYTES = {}  # benchmark name -> the bytes it must move at least (its `bytes` counter)
CONTROL = "BM_onednn_control_copy_f32_16M"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--filter", default="^BM_onednn_")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/onednn-choice.json"))
    args = ap.parse_args()
    binary = os.path.join(args.build, "bench/bench_cpu_micro")
    samples = {m: [] for m in MODES}
    for _ in range(args.rounds):  # alternate so that machine noise hits every mode alike
        for m in MODES:
            samples[m].append(run(binary, m, args.threads, args.filter, args.min_time))
    names = sorted(samples["native"][0])
    copy_gbps = None
    if CONTROL in samples["native"][0] and CONTROL in BYTES:
        copy_gbps = BYTES[CONTROL] / (statistics.median(s[CONTROL] for s in samples["native"]) * 1e-3) / 1e9
        print(f"copy bandwidth (control row, native median): {copy_gbps:.1f} GB/s")
    rows = []
    print(f"{'case':48s} {'native ms':>10s} {'oneDNN ms':>10s} {'rule ms':>9s} {'speedup':>8s} {'range':>13s} {'best':>6s} "
          f"{'floor ms':>9s} wins")
    for n in names:
        per = {m: [s[n] for s in samples[m]] for m in MODES}
        med = {m: statistics.median(v) for m, v in per.items()}
        lo, hi = min(per["native"]) / max(per["onednn"]), max(per["native"]) / min(per["onednn"])
        rows.append({"work": n.replace("BM_onednn_", ""), "unit": "ms", "native": round(med["native"], 4),
                     "onednn": round(med["onednn"], 4), "rule": round(med["rule"], 4),
                     "speedup": round(med["native"] / med["onednn"], 3), "speedup_min": round(lo, 3),
                     "speedup_max": round(hi, 3),
                     "speedup_best": round(min(per["native"]) / min(per["onednn"]), 3), "samples": {m: [round(x, 4) for x in v] for m, v in per.items()}})
        rows[-1]["wins"] = rows[-1]["speedup"] > 1 and rows[-1]["speedup_best"] > 1
        if n in BYTES and copy_gbps:
            rows[-1]["bytes"] = int(BYTES[n])
            rows[-1]["floor_ms"] = round(BYTES[n] / (copy_gbps * 1e9) * 1e3, 4)
        print(f"{n.replace('BM_onednn_', ''):48s} {med['native']:10.3f} {med['onednn']:10.3f} {med['rule']:9.3f} "
              f"{med['native'] / med['onednn']:8.2f} {lo:6.2f}-{hi:<6.2f} {min(per['native']) / min(per['onednn']):6.2f} "
              f"{rows[-1].get('floor_ms', float('nan')):9.3f} {'yes' if rows[-1]['wins'] else ''}")
    doc = {"suite": "onednn-choice", "device": "cpu", "cpu": cpu_name(), "threads": args.threads,
           "commit": commit_id(ROOT), "date": datetime.date.today().isoformat(), "rounds": args.rounds,
           "copy_gbps": round(copy_gbps, 2) if copy_gbps else None, "rows": rows}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
