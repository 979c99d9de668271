#!/usr/bin/env python3
"""Runs tessera's CUDA graph benchmarks (build/bench/bench_cuda_graph) and the same work in PyTorch
(bench/torch/cuda_graph.py) on this machine's GPU and writes their rows into
bench/results/amp-graphs.json (DESIGN.md's format; rows of other work in that file are kept). Builds
nothing. Rows (ratio: higher is better for tessera):
  graph replay of a 200-op step    tessera eager ms / tessera graph ms (the launch time saved), no target;
                                   torch's eager and graph figures beside it;
  MLP step eager                   tessera steps/s / PyTorch eager steps/s, target 2.0;
  MLP step graph replay            tessera steps/s / PyTorch torch.cuda.graph steps/s, target 1.0.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def json_lines(text):
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            out[r["name"]] = r["value"]
    return out


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--runs", default="20")
    a = ap.parse_args()
    ts = json_lines(sh([os.path.join(a.build, "bench", "bench_cuda_graph"), "--runs", a.runs]))
    pt = json_lines(sh([a.python, os.path.join(ROOT, "bench", "torch", "cuda_graph.py"), "--runs", a.runs]))

    def row(work, unit, value, ref_name, ref_value, ratio, target, torch_eager=None):
        return {"work": work, "unit": unit, "tessera": value, "reference": ref_name, "reference_value": ref_value,
                "ratio": ratio, "target": target, "meets": None if target is None or ratio is None else ratio >= target,
                "torch_eager": torch_eager, "torch_compile": None, "peak_mem_gib": None}

    def div(x, y):
        return None if x is None or y is None or y == 0 else x / y

    rows = [
        row("graph replay of a 200-op step (1024 f32) vs eager launch", "ms/step", ts.get("step200_graph"),
            "tessera eager launch", ts.get("step200_eager"), div(ts.get("step200_eager"), ts.get("step200_graph")),
            None, pt.get("step200_eager")),
        row("PyTorch torch.cuda.graph replay of the 200-op step (reference)", "ms/step", pt.get("step200_graph"),
            "PyTorch eager", pt.get("step200_eager"), div(pt.get("step200_eager"), pt.get("step200_graph")), None,
            pt.get("step200_eager")),
        row("MLP 784-512-512-10 b128 SGD momentum f32 step, eager", "steps/s",
            ts.get("mlp_784_512_512_10_b128_sgd_eager"), "PyTorch eager", pt.get("mlp_784_512_512_10_b128_sgd_eager"),
            div(ts.get("mlp_784_512_512_10_b128_sgd_eager"), pt.get("mlp_784_512_512_10_b128_sgd_eager")), 2.0,
            pt.get("mlp_784_512_512_10_b128_sgd_eager")),
        row("MLP 784-512-512-10 b128 SGD momentum f32 step, CUDA graph replay", "steps/s",
            ts.get("mlp_784_512_512_10_b128_sgd_graph"), "PyTorch torch.cuda.graph replay",
            pt.get("mlp_784_512_512_10_b128_sgd_graph"),
            div(ts.get("mlp_784_512_512_10_b128_sgd_graph"), pt.get("mlp_784_512_512_10_b128_sgd_graph")), 1.0,
            pt.get("mlp_784_512_512_10_b128_sgd_eager")),
    ]
    path = os.path.join(ROOT, "bench", "results", "amp-graphs.json")
    doc = {"suite": "amp-graphs", "rows": []}
    if os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
    ours = {r["work"] for r in rows}
    doc["rows"] = [r for r in doc.get("rows", []) if r.get("work") not in ours] + rows
    gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).splitlines()[0].split(", ")
    doc.update({"suite": "amp-graphs", "device": gpu[0], "driver": gpu[1],
                "commit": commit_id(ROOT),
                "date": datetime.date.today().isoformat()})
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    for r in rows:
        print(f"{r['work']:<70} {r['tessera']!s:>12} {r['unit']:<8} ref {r['reference_value']!s:>12} "
              f"ratio {r['ratio']!s:>8} target {r['target']!s:>5} meets {r['meets']}")
    return 0 if all(r["meets"] in (None, True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
