#!/usr/bin/env python3
"""The accuracy row of bench/results/amp-graphs.json (issue "Mixed precision, CUDA graphs and the
profiler", Measured): the CNN of `tessera train` on Fashion-MNIST, 6 epochs, batch 64, seed 0, on the
GPU in float32 and under bfloat16 autocast; the final test accuracies and their difference in
percentage points (target: within 0.3). Builds nothing; needs build/apps/tessera and the data.
  --data DIR      the Fashion-MNIST directory (default: the train command's own default)
  --logs F32 BF16 parse two existing logs of those runs instead of training
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ACC = re.compile(r"test accuracy ([0-9.]+)%")


def final_accuracy(text):
    found = ACC.findall(text)
    if not found:
        raise SystemExit("run_amp_accuracy: no 'test accuracy' line in the run's output")
    return float(found[-1])


def run(build, amp, data):
    cmd = [os.path.join(build, "apps", "tessera"), "train", "--model", "cnn", "--epochs", "6", "--batch-size", "64",
           "--seed", "0", "--device", "cuda", "--amp", amp]
    if data:
        cmd += ["--data", "fashion-mnist:" + data]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--data", default="")
    ap.add_argument("--logs", nargs=2, metavar=("F32", "BF16"))
    ap.add_argument("--commit", default="", help="commit the logs were made at (with --logs)")
    a = ap.parse_args()
    if a.logs:
        texts = [open(p).read() for p in a.logs]
    else:
        texts = [run(a.build, amp, a.data) for amp in ("off", "bf16")]
    f32, bf16 = (final_accuracy(t) for t in texts)
    diff = bf16 - f32
    row = {"work": "CNN Fashion-MNIST test accuracy after 6 epochs, bf16 autocast vs float32 (percentage points)",
           "unit": "%", "tessera": bf16, "reference": "tessera float32", "reference_value": f32,
           "ratio": None, "difference_pp": round(diff, 3), "target": "|difference| <= 0.3 pp",
           "meets": abs(diff) <= 0.3, "torch_eager": None, "torch_compile": None, "peak_mem_gib": None}
    path = os.path.join(ROOT, "bench", "results", "amp-graphs.json")
    doc = {"suite": "amp-graphs", "rows": []}
    if os.path.exists(path):
        with open(path) as f:
            doc = json.load(f)
    doc["rows"] = [r for r in doc.get("rows", []) if r.get("work") != row["work"]] + [row]
    if not a.logs:
        gpu = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).splitlines()[0].split(", ")
        doc.update({"device": gpu[0], "driver": gpu[1]})
    row["commit"] = a.commit or commit_id(ROOT)
    row["date"] = datetime.date.today().isoformat()
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"float32 {f32:.2f}%  bf16 autocast {bf16:.2f}%  difference {diff:+.2f} pp  meets {row['meets']}")
    return 0 if row["meets"] else 1


if __name__ == "__main__":
    sys.exit(main())
