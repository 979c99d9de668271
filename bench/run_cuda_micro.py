#!/usr/bin/env python3
"""Runs tessera's CUDA micro-benchmarks (build/bench/bench_cuda_micro) and the same work in PyTorch
(bench/torch/cuda_micro.py) on this machine's GPU, in alternating rounds, and writes
bench/results/cuda-micro.json in DESIGN.md's format; prints a table. Builds nothing.

Each row's figure is the median over rounds of each side's median of >= 20 timed calls. `ratio` is
oriented so that higher is better for tessera:
  bandwidth rows   tessera GB/s / device-copy GB/s (the copy measured in the same tessera run), target 0.90
                   (elementwise) or 0.85 (reductions);
  time rows        PyTorch ms / tessera ms (softmax, layer norm: 1.0; ResNet-50 convolutions: 0.95);
  matmul rows      tessera TFLOP/s / PyTorch TFLOP/s, target 0.95 (causal attention: 1.0);
  eager overhead   PyTorch us per op / tessera us per op, target 2.0 (tessera at most half of PyTorch's);
  allocation       0.5 us / tessera us per allocate-and-free, target 1.0.
A row that raised on the tessera side (a kernel not there yet) has tessera null, "error", and meets false;
the run goes on. Exit status: 0 when every row with a target meets it, 1 otherwise, 2 when nothing ran.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id, gpu_info, run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COPY = "copy_d2d_f32_256M"
# name -> (work, kind, target); kind: "bw" vs the device copy, "time" vs torch, "rate" vs torch,
# "overhead" vs torch, "alloc" vs the 0.5 us budget, "ref" the device copy itself.
ROWS = {
    COPY: ("device copy f32 256M (1 GiB, cudaMemcpyAsync)", "ref", None),
    "add_f32_256M": ("add f32 256M", "bw", 0.90),
    "mul_f32_256M": ("mul f32 256M", "bw", 0.90),
    "gelu_f32_256M": ("gelu f32 256M", "bw", 0.90),
    "copy_f32_256M": ("copy_ f32 256M", "bw", 0.90),
    "add_bf16_256M": ("add bf16 256M", "bw", 0.90),
    "mul_bf16_256M": ("mul bf16 256M", "bw", 0.90),
    "gelu_bf16_256M": ("gelu bf16 256M", "bw", 0.90),
    "copy_bf16_256M": ("copy_ bf16 256M", "bw", 0.90),
    "sum_lastdim_f32_16384x16384": ("sum last dim f32 16384x16384", "bw", 0.85),
    "sum_firstdim_f32_16384x16384": ("sum first dim f32 16384x16384", "bw", 0.85),
    "softmax_bf16_16384x4096": ("softmax fwd bf16 16384x4096", "time", 1.0),
    "layer_norm_fwd_bf16_16384x4096": ("layer_norm fwd bf16 16384x4096", "time", 1.0),
    "layer_norm_bwd_bf16_16384x4096": ("layer_norm bwd bf16 16384x4096", "time", 1.0),
    "rms_norm_fwd_bf16_16384x4096": ("rms_norm fwd bf16 16384x4096", "time", 1.0),
    "attention_fwd_bf16_B16_H12_T1024_D64_causal": ("attention fwd bf16 B16 H12 T1024 D64 causal", "rate", 1.0),
    "attention_fwd_bwd_bf16_B16_H12_T1024_D64_causal": ("attention fwd+bwd bf16 B16 H12 T1024 D64 causal", "rate", 1.0),
    "attention_fwd_bf16_B8_H16_T2048_D128_causal": ("attention fwd bf16 B8 H16 T2048 D128 causal", "rate", 1.0),
    "attention_fwd_bwd_bf16_B8_H16_T2048_D128_causal": ("attention fwd+bwd bf16 B8 H16 T2048 D128 causal", "rate",
                                                        1.0),
    "cross_entropy_fwd_bwd_bf16_8192x50257": ("cross_entropy fwd+bwd bf16 8192x50257 (mean)", "time", 1.0),
    "add_layer_norm_fwd_bwd_bf16_16384x768": ("add + layer_norm fwd+bwd bf16 16384x768 (fused)", "time", 1.0),
    "linear_gelu_fwd_bwd_bf16_16384x768x3072": ("linear + gelu(tanh) fwd+bwd bf16 16384x768 @ 768x3072 (fused)",
                                                "time", 1.0),
    "mlp_gelu_fwd_bwd_bf16_16384x768x3072x768": ("GPT-2 MLP (c_fc, gelu(tanh), c_proj) fwd+bwd bf16 16384x768 (fused)",
                                                 "time", 1.0),
    "linear_fwd_bwd_bf16_16384x768x50257": ("linear fwd+bwd bf16 16384x768 @ 768x50257 (unaligned logits rows)",
                                            "time", 1.0),
    "linear_cross_entropy_fwd_bwd_bf16_16384x768x50257": (
        "linear + cross_entropy fwd+bwd bf16 16384x768, V=50257 (chunked, vs unfused)", "time", 1.0),
    "matmul_bf16_8192": ("matmul bf16 8192^3", "rate", 0.95),
    "matmul_f32_tf32_8192": ("matmul f32 (TF32) 8192^3", "rate", 0.95),
    "conv2d_rn50_b256_bf16_fwd_bwd": ("conv2d fwd+bwd ResNet-50 layers b256 bf16", "time", 0.95),
    "batch_norm_fwd_bwd_bf16_cl_256x256x56x56": ("batch_norm train fwd+bwd bf16 NHWC 256x256x56x56", "time", None),
    "eager_add_1024_x1000": ("eager add 1024 f32 (1000 dependent ops)", "overhead", 2.0),
    "alloc_free_1MiB": ("allocate+free 1 MiB (cached block)", "alloc", 1.0),
}
UNITS = {"ref": "GB/s", "bw": "GB/s", "time": "ms", "rate": "TFLOP/s", "overhead": "us/op", "alloc": "us/op"}
CONV_PREFIX = "conv2d_rn50_b256_bf16/"
ALLOC_BUDGET_US = 0.5


def med(runs, name, key="value"):
    """Median of a field over rounds (None where no round has a number), and the last error seen."""
    vals = [r[name][key] for r in runs if name in r and isinstance(r[name].get(key), (int, float))]
    errs = [r[name]["error"] for r in runs if name in r and r[name].get("error")]
    return (statistics.median(vals) if vals else None), (errs[-1] if errs else None)


def rnd(x, n=4):
    return None if x is None else round(x, n)


def build_rows(ts_runs, pt_runs, torch_label):
    copy_bw, _ = med(ts_runs, COPY)
    rows, conv_layers = [], []
    for name, (work, kind, target) in ROWS.items():
        t, err = med(ts_runs, name)
        p, perr = med(pt_runs, name)
        pc, _ = med(pt_runs, name, "compile")
        peak, _ = med(ts_runs, name, "peak_mem_gib")
        unit = UNITS[kind]
        if kind in ("ref", "bw"):
            reference, ref_value = "device copy", copy_bw
            ratio = t / copy_bw if t and copy_bw else None
        elif kind in ("time", "overhead"):
            reference, ref_value = torch_label, p
            ratio = p / t if t and p else None
        elif kind == "rate":
            reference, ref_value = torch_label, p
            ratio = t / p if t and p else None
        else:  # alloc
            reference, ref_value = f"{ALLOC_BUDGET_US} us budget", ALLOC_BUDGET_US
            ratio = ALLOC_BUDGET_US / t if t else None
        row = {"work": work, "unit": unit, "tessera": rnd(t), "reference": reference,
               "reference_value": rnd(ref_value), "ratio": rnd(ratio, 3), "target": target,
               "meets": (ratio is not None and ratio >= target) if target is not None else None,
               "torch_eager": rnd(p), "torch_compile": rnd(pc), "peak_mem_gib": rnd(peak, 3)}
        if name.startswith("conv2d"):
            layouts = {r[name].get("layout") for r in ts_runs if name in r and r[name].get("layout")}
            if layouts:
                row["layout"] = "/".join(sorted(layouts))
        if err and t is None:
            row["error"] = err
        if perr and p is None:
            row["torch_error"] = perr
        rows.append(row)
    names = [n for n in row_order(ts_runs + pt_runs) if n.startswith(CONV_PREFIX)]
    for name in names:
        t, err = med(ts_runs, name)
        p, _ = med(pt_runs, name)
        layer = {"layer": name[len(CONV_PREFIX):], "unit": "ms", "tessera": rnd(t), "torch_eager": rnd(p),
                 "ratio": rnd(p / t if t and p else None, 3)}
        if err and t is None:
            layer["error"] = err
        conv_layers.append(layer)
    return rows, conv_layers


def row_order(runs):
    """Row names in the order the programs printed them (the first run that has them)."""
    order = []
    for r in runs:
        for n in r:
            if n not in order:
                order.append(n)
    return order


def fmt(x, w, d=3):
    return f"{x:{w}.{d}f}" if isinstance(x, (int, float)) else f"{'-':>{w}s}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=os.environ.get("TESSERA_PYTHON", "/usr/bin/python3"),
                    help="the interpreter whose PyTorch (built with CUDA) runs bench/torch/cuda_micro.py")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--only", default="", help="only the rows whose name contains one of these comma-separated parts")
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per program run")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/cuda-micro.json"))
    args = ap.parse_args()

    binary = os.path.join(args.build, "bench/bench_cuda_micro")
    if not os.path.exists(binary):
        print(f"{binary} is missing: configure with the cuda preset and build the target bench_cuda_micro",
              file=sys.stderr)
        return 2
    ts_cmd = [binary, "--runs", str(args.runs)] + (["--only", args.only] if args.only else [])
    pt_cmd = [args.python, os.path.join(ROOT, "bench/torch/cuda_micro.py"), "--runs", str(args.runs)]
    pt_cmd += ["--only", args.only] if args.only else []
    ts_runs, pt_runs, ts_head, pt_head = [], [], {}, {}
    for r in range(args.rounds):  # alternate so that clocks and neighbours hit both sides alike
        h, rows = run(ts_cmd, "bench_cuda_micro", args.timeout)
        ts_head.update(h)
        if rows:
            ts_runs.append(rows)
        # torch.compile once (first round): compiling is slow and its figure does not need more rounds
        h, rows = run(pt_cmd + ([] if args.compile and r == 0 else ["--no-compile"]), "cuda_micro.py", args.timeout)
        pt_head.update(h)
        if rows:
            pt_runs.append(rows)
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    if not ts_runs and not pt_runs:
        print("neither side ran", file=sys.stderr)
        return 2

    name, driver = gpu_info()
    torch_label = f"torch {pt_head.get('torch', '?')} eager"
    rows, conv_layers = build_rows(ts_runs, pt_runs, torch_label)
    commit = commit_id(ROOT)
    doc = {"suite": "cuda-micro", "device": name or ts_head.get("device"), "driver": driver, "commit": commit,
           "date": datetime.date.today().isoformat(), "torch": pt_head.get("torch"), "rounds": args.rounds,
           "runs_per_round": max(args.runs, 20), "rows": rows, "conv_layers": conv_layers}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

    print(f"{doc['device']}  driver {driver}  {torch_label}  commit {commit}")
    print(f"{'work':48s} {'unit':>8s} {'tessera':>10s} {'reference':>10s} {'ratio':>7s} {'target':>7s} "
          f"{'meets':>5s} {'torch':>10s} {'compile':>10s}")
    for r in rows:
        meets = "-" if r["meets"] is None else ("yes" if r["meets"] else "NO")
        print(f"{r['work']:48s} {r['unit']:>8s} {fmt(r['tessera'], 10)} {fmt(r['reference_value'], 10)} "
              f"{fmt(r['ratio'], 7)} {fmt(r['target'], 7, 2)} {meets:>5s} {fmt(r['torch_eager'], 10)} "
              f"{fmt(r['torch_compile'], 10)}" + (f"  error: {r['error'][:80]}" if r.get("error") else ""))
    if conv_layers:
        print(f"\n{'conv layer (fwd+bwd, ms)':48s} {'tessera':>10s} {'torch':>10s} {'ratio':>7s}")
        for c in conv_layers:
            print(f"{c['layer']:48s} {fmt(c['tessera'], 10)} {fmt(c['torch_eager'], 10)} {fmt(c['ratio'], 7)}")
    print(f"wrote {args.out}")
    return 0 if all(r["meets"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
