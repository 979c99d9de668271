#!/usr/bin/env python3
"""The libtorch column: tessera against libtorch, C++ against C++, on this machine's GPU. Builds
bench/libtorch/ (its own CMake project) against the libtorch of the PyTorch that --python imports
(torch.utils.cmake_prefix_path), then runs, in --rounds alternating rounds, tessera's rows
(build/bench/bench_cuda_micro's eager_add_1024_x1000, build/bench/bench_models' mlp and gpt2 rows) and
bench_libtorch's same rows, and writes bench/results/libtorch-cuda.json whole, with every sample.

Rows (ratio oriented so that higher is better for tessera; median over rounds; the spread is the
min-max of the per-round ratios, and one that holds 1.0 is parity):
  eager_add_1024_x1000          us/op      libtorch / tessera
  mlp_784_512_512_10_b128_sgd   steps/s    tessera / libtorch
  gpt2_124m_train_b16x1024      tokens/s   tessera / libtorch
Exit status: 0 when both sides ran every row, 2 when a side could not be built or run.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id, gpu_info, json_lines, verdict  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROWS = [("eager_add_1024_x1000", "us/op", False), ("mlp_784_512_512_10_b128_sgd", "steps/s", True),
        ("gpt2_124m_train_b16x1024", "tokens/s", True)]


def sh(cmd, what, timeout=900):
    print(f"==> {what}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        print(f"{what}: exit status {p.returncode}\n{p.stderr[-3000:]}", file=sys.stderr)
    return p


def build_libtorch_bench(python, build_dir):
    prefix = subprocess.run([python, "-c", "import torch.utils; print(torch.utils.cmake_prefix_path)"],
                            capture_output=True, text=True)
    if prefix.returncode != 0:
        print("run_libtorch: torch is not importable: " + prefix.stderr[-500:], file=sys.stderr)
        return None
    src = os.path.join(ROOT, "bench", "libtorch")
    if sh(["cmake", "-S", src, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
           "-DCMAKE_PREFIX_PATH=" + prefix.stdout.strip()], "configure bench/libtorch").returncode != 0:
        return None
    if sh(["cmake", "--build", build_dir, "-j", str(os.cpu_count() or 2)], "build bench/libtorch").returncode != 0:
        return None
    return os.path.join(build_dir, "bench_libtorch")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    exe = build_libtorch_bench(a.python, os.path.join(a.build, "libtorch-bench"))
    if exe is None:
        return 2
    tessera_cmds = [[os.path.join(a.build, "bench", "bench_cuda_micro"), "--only", "eager_add_1024_x1000", "--runs", "20"],
                    [os.path.join(a.build, "bench", "bench_models"), "--only", "mlp_784_512_512_10_b128_sgd"],
                    [os.path.join(a.build, "bench", "bench_models"), "--only", "gpt2_124m_train_b16x1024"]]
    rounds = []  # per round: {"tessera": rows, "libtorch": rows}
    header = {}
    for r in range(a.rounds):
        got = {"tessera": {}, "libtorch": {}}
        for cmd in tessera_cmds:
            got["tessera"].update(json_lines(sh(cmd, f"round {r}: tessera").stdout)[1])
        h, rows = json_lines(sh([exe], f"round {r}: libtorch").stdout)
        header.update(h)
        got["libtorch"] = rows
        rounds.append(got)

    def value(side, name, r):
        row = rounds[r][side].get(name)
        return row.get("value") if row else None

    out_rows, complete = [], True
    for name, unit, higher in ROWS:
        ts = [value("tessera", name, r) for r in range(a.rounds)]
        lt = [value("libtorch", name, r) for r in range(a.rounds)]
        ok = all(isinstance(x, (int, float)) for x in ts + lt)
        complete = complete and ok
        per_round = [(t / l if higher else l / t) for t, l in zip(ts, lt)] if ok else []
        ratio = statistics.median(per_round) if per_round else None
        row_verdict = verdict(min(per_round), max(per_round)) if per_round else None
        out_rows.append({
            "work": name, "unit": unit, "tessera": statistics.median(ts) if ok else None,
            "libtorch": statistics.median(lt) if ok else None, "ratio": ratio,
            "ratio_min": min(per_round) if per_round else None, "ratio_max": max(per_round) if per_round else None,
            "verdict": row_verdict, "tessera_rounds": ts, "libtorch_rounds": lt,
            "errors": {side: rounds[r][side].get(name, {}).get("error") for r in range(a.rounds)
                       for side in ("tessera", "libtorch") if rounds[r][side].get(name, {}).get("error")},
            "samples": [{side: rounds[r][side].get(name) for side in ("tessera", "libtorch")} for r in range(a.rounds)],
        })
    gpu, driver = gpu_info()
    doc = {"suite": "libtorch", "device": gpu, "driver": driver, "commit": commit_id(ROOT),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "libtorch": header.get("libtorch"), "rounds": a.rounds,
           "method": "alternating processes per round; each row's value is its process's median over runs; "
                     "ratio: median of the per-round ratios, spread their min and max", "rows": out_rows}
    path = os.path.join(ROOT, "bench", "results", "libtorch-cuda.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    for r in out_rows:
        print(f"{r['work']:32s} tessera {r['tessera']}  libtorch {r['libtorch']}  ratio {r['ratio']} "
              f"[{r['ratio_min']}, {r['ratio_max']}] {r['verdict']}")
    print(f"wrote {path}")
    return 0 if complete else 2


if __name__ == "__main__":
    sys.exit(main())
