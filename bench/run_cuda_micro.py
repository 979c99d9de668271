#!/usr/bin/env python3
"""Runs tessera's CUDA micro-benchmarks (build/bench/bench_cuda_micro) and the same work in PyTorch
(bench/torch/cuda_micro.py: eager, and torch.compile where it applies) on this machine's GPU, in
--rounds alternating rounds (tessera's process, then PyTorch's, --rounds times), and writes
bench/results/cuda-micro.json whole from that one run, in DESIGN.md's format, with every raw sample;
prints a table. Builds nothing.

Each side's figure of a round is its program's median of >= 20 timed calls (the calls' times are kept
in the row's "samples", with the work of one call: bytes, FLOPs or ops). A row's figures are medians
over the rounds with their min-max. `ratio` is oriented so that higher is better for tessera and is the
median of the per-round ratios (round i of tessera against round i of the reference), `ratio_min` and
`ratio_max` their spread, and a spread that holds 1.0 is "parity" (else "faster" or "slower"):
  bandwidth rows   tessera GB/s / device-copy GB/s (the copy measured in the same tessera process),
                   target 0.90 (elementwise) or 0.85 (reductions); beside it ratio_vs_torch against the
                   faster PyTorch side (torch_reference);
  time rows        PyTorch ms / tessera ms (softmax, norms, fused ops: 1.0; ResNet-50 convolutions: 0.95);
  matmul rows      tessera TFLOP/s / PyTorch TFLOP/s, target 0.95 (causal attention: 1.0);
  eager overhead   PyTorch eager (from Python) us per op / tessera us per op, target 2.0 (tessera at most
                   half of PyTorch's; libtorch's C++ figure of the same work is in libtorch-cuda.json);
  allocation       0.5 us / tessera us per allocate-and-free, target 1.0; ratio_vs_torch beside it.
The PyTorch reference is the faster (by median) of eager and torch.compile, named in "reference"
("torch eager" or "torch.compile"); torch.compile (default mode) runs on the elementwise, reduction,
softmax and norm rows (COMPILED), where it compiles the same function as the eager row.
A side that fails in a round (its program raised on a row, crashed or ran past --timeout) has null in
that round and its last error in the row's "errors"; the run goes on, and a row whose tessera side never
ran has meets false.
A partial run (--only, --no-compile or fewer than 3 rounds) writes bench/results/cuda-micro-partial.json
and never touches cuda-micro.json.

Exit status: 0 when every row with a target meets it, 1 otherwise, 2 when nothing ran.
usage: run_cuda_micro.py [--build build] [--python PY] [--rounds 3] [--runs 20] [--only A,B] [--no-compile]
"""
import argparse
import datetime
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import (alternating_rounds, as_output, commit_id, faster_side, fmt, gpu_environment,  # noqa: E402
                      raw_last, round_value, set_ratio, spread, summarize_sides)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = "cuda-micro"
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
# The rows whose PyTorch side also runs under torch.compile (bench/torch/cuda_micro.py's "compile" field).
COMPILED = {"add_f32_256M", "mul_f32_256M", "gelu_f32_256M", "copy_f32_256M", "add_bf16_256M", "mul_bf16_256M",
            "gelu_bf16_256M", "copy_bf16_256M", "sum_lastdim_f32_16384x16384", "sum_firstdim_f32_16384x16384",
            "softmax_bf16_16384x4096", "layer_norm_fwd_bf16_16384x4096", "layer_norm_bwd_bf16_16384x4096",
            "rms_norm_fwd_bf16_16384x4096"}
NOTES = {
    "eager_add_1024_x1000": "PyTorch eager from Python (bench/torch/cuda_micro.py); the same work in libtorch's C++ "
                            "API, C++ against C++, is the libtorch column of libtorch-cuda.json "
                            "(bench/run_libtorch.py)",
    "conv2d_rn50_b256_bf16_fwd_bwd": "per round, the sum of the medians of the conv_layers rows",
}
UNITS = {"ref": "GB/s", "bw": "GB/s", "time": "ms", "rate": "TFLOP/s", "overhead": "us/op", "alloc": "us/op"}
HIGHER_IS_BETTER = {"GB/s": True, "TFLOP/s": True, "ms": False, "us/op": False}
CONV_PREFIX = "conv2d_rn50_b256_bf16/"
ALLOC_BUDGET_US = 0.5
TORCH_SIDES = {"torch_eager": "torch eager", "torch_compile": "torch.compile"}
METHOD = ("alternating processes per round (tessera, then PyTorch eager and torch.compile in one process); a side's "
          "figure of a round is its program's median over runs_per_round calls (samples); figures: median over "
          "rounds, min and max; ratio: median of the per-round ratios, spread their min and max, parity where "
          "the spread holds 1.0")


def selected(name, only):
    """The programs' --only rule: the name contains one of the comma-separated parts."""
    return not only or any(part and part in name for part in only.split(","))


# ---------------------------------------------------------------------------------------------------
# Program outputs -> the document (pure: the results check's self-test builds documents with it).

def outputs(rnd, name, compile_column):
    """Each side's output for one row in one round: the program's line without its name (torch.compile's
    from the PyTorch line's "compile" field, with the eager line's work), or {"value": null, "error"} where
    the side has no line for it."""
    def missing(side_run, program):
        return {"value": None, "error": side_run["error"] or f"{program} printed no row {name}"}
    ts_run, pt_run = rnd["tessera"], rnd["torch"]
    ts = ts_run["rows"].get(name)
    pt = pt_run["rows"].get(name)
    out = {"tessera": as_output(ts) if ts else missing(ts_run, "bench_cuda_micro"),
           "torch_eager": as_output(pt, ("name", "compile")) if pt else missing(pt_run, "cuda_micro.py")}
    if compile_column:
        if not pt:
            c = missing(pt_run, "cuda_micro.py")
        elif isinstance(pt.get("compile"), dict):
            c = as_output(pt["compile"])
            if not c.get("error"):  # the work of one call is the eager line's
                c.update({k: pt[k] for k in ("unit", "bytes", "flops", "ops") if k in pt})
        elif pt.get("value") is None:  # the row raised before torch.compile's turn
            c = {"value": None, "error": pt.get("error") or "cuda_micro.py: the row failed"}
        else:
            c = {"value": None, "error": "cuda_micro.py printed no torch.compile figure"}
        out["torch_compile"] = c
    return out


def torch_reference(row, higher):
    """The faster PyTorch side of a row by median ("torch_eager" or "torch_compile"), eager when neither ran."""
    sides = {s: row.get(s) for s in TORCH_SIDES if s + "_rounds" in row}
    return faster_side(sides, higher) or "torch_eager"


def build_row(name, work, kind, target, per_round, copy_rounds, compile_column):
    unit = UNITS[kind]
    higher = HIGHER_IS_BETTER[unit]
    sides = ["tessera", "torch_eager"] + (["torch_compile"] if compile_column else [])
    row = {"work": work, "name": name, "unit": unit}
    summarize_sides(row, per_round, sides)
    if not compile_column:
        row["torch_compile"] = None
    row["libtorch"] = None
    best = torch_reference(row, higher)
    if kind in ("ref", "bw", "alloc"):
        if kind == "alloc":
            row["reference"] = f"{ALLOC_BUDGET_US} us budget"
            ref_rounds = [ALLOC_BUDGET_US] * len(per_round)
        else:
            row["reference"], row["reference_row"] = "device copy", COPY
            ref_rounds = copy_rounds
        set_ratio(row, "ratio", row["tessera_rounds"], ref_rounds, higher)
        row["torch_reference"] = TORCH_SIDES[best]
        set_ratio(row, "ratio_vs_torch", row["tessera_rounds"], row[best + "_rounds"], higher)
    else:
        row["reference"] = TORCH_SIDES[best]
        ref_rounds = row[best + "_rounds"]
        set_ratio(row, "ratio", row["tessera_rounds"], ref_rounds, higher)
    row["reference_value"], row["reference_min"], row["reference_max"] = spread(ref_rounds)
    row["target"] = target
    row["meets"] = None if target is None else (row["ratio"] is not None and row["ratio"] >= target)
    row["peak_mem_gib"] = spread([o["tessera"].get("peak_mem_gib") for o in per_round])[0]
    layouts = {o["tessera"].get("layout") for o in per_round if o["tessera"].get("layout")}
    if layouts:
        row["layout"] = "/".join(sorted(layouts))
    if name in NOTES:
        row["note"] = NOTES[name]
    return raw_last(row)


def build_document(raw):
    """The results document of one run. raw: {"rounds": [{"tessera": side, "torch": side}] where side is
    {"header", "rows" (name -> the program's line), "error" (None or why the process failed)}, "env"
    (bench_io.gpu_environment()), "clocks_before", "clocks_after" (bench_io.gpu_clocks()), "commit", "date",
    "only", "compile", "runs"}."""
    rounds = raw["rounds"]
    only, compile_on = raw["only"], raw["compile"]
    partial = bool(only) or not compile_on or len(rounds) < 3
    per_round = {}

    def round_outputs(name):
        if name not in per_round:
            per_round[name] = [outputs(r, name, compile_on and name in COMPILED) for r in rounds]
        return per_round[name]

    copy_rounds = [round_value(o["tessera"]) for o in round_outputs(COPY)] if selected(COPY, only) else []
    rows = [build_row(name, work, kind, target, round_outputs(name), copy_rounds, compile_on and name in COMPILED)
            for name, (work, kind, target) in ROWS.items() if selected(name, only)]
    layers = []
    for r in rounds:  # in the order the programs printed them
        for side in ("tessera", "torch"):
            layers += [n for n in r[side]["rows"] if n.startswith(CONV_PREFIX) and n not in layers]
    conv_layers = []
    for name in layers:
        row = build_row(name, name[len(CONV_PREFIX):], "time", None, round_outputs(name), [], False)
        conv_layers.append({"layer": row.pop("work"), **row})
    header = {}
    for r in rounds:
        header.update(r["tessera"]["header"])
    env = dict(raw["env"])
    if not env.get("device"):
        env["device"] = header.get("device")
    return {"suite": SUITE, "partial": partial, "only": only or None, "compile": compile_on, "commit": raw["commit"],
            "date": raw["date"], **env, "sm": header.get("sm"), "clocks_before": raw["clocks_before"],
            "clocks_after": raw["clocks_after"], "rounds": len(rounds), "runs_per_round": max(raw["runs"], 20),
            "method": METHOD, "rows": rows, "conv_layers": conv_layers}


# ---------------------------------------------------------------------------------------------------
# The run.

def collect(args, binary):
    only = f"{args.only},{COPY}" if args.only else ""  # the bandwidth rows' reference runs in every partial run
    ts_cmd = [binary, "--runs", str(args.runs)] + (["--only", only] if only else [])
    pt_cmd = [args.python, os.path.join(ROOT, "bench", "torch", "cuda_micro.py"), "--runs", str(args.runs)]
    pt_cmd += (["--only", only] if only else []) + ([] if args.compile else ["--no-compile"])
    env = gpu_environment(args.python)
    raw = {"env": env, "commit": commit_id(ROOT), "only": only, "compile": args.compile, "runs": args.runs,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "rounds": []}
    alternating_rounds(raw, (("tessera", ts_cmd, "bench_cuda_micro"), ("torch", pt_cmd, "cuda_micro.py")),
                       args.rounds, args.timeout)
    return raw


def print_table(doc):
    print(f"{doc['device']}  driver {doc['driver']}  torch {doc['torch']}  commit {doc['commit']}  "
          f"{doc['rounds']} rounds" + ("  (partial)" if doc["partial"] else ""))
    print(f"{'work':52s} {'unit':>7s} {'tessera':>10s} {'eager':>10s} {'compile':>10s} {'reference':>13s} "
          f"{'ratio':>6s} {'min-max':>13s} {'verdict':>7s} {'target':>6s} {'meets':>5s}  vs torch")
    for r in doc["rows"]:
        meets = "-" if r["meets"] is None else ("yes" if r["meets"] else "NO")
        spread_ = f"{fmt(r['ratio_min'], 6)}-{fmt(r['ratio_max'], 6).strip()}" if r["ratio"] else "-"
        vs = (f"  {r['ratio_vs_torch']:.3f} ({r['verdict_vs_torch']}, {r['torch_reference']})"
              if r.get("ratio_vs_torch") else "")
        err = f"  errors: {'; '.join(f'{k}: {v[:60]}' for k, v in r['errors'].items())}" if r["errors"] else ""
        print(f"{r['work'][:52]:52s} {r['unit']:>7s} {fmt(r['tessera'], 10)} {fmt(r['torch_eager'], 10)} "
              f"{fmt(r['torch_compile'], 10)} {r['reference'][:13]:>13s} {fmt(r['ratio'], 6)} {spread_:>13s} "
              f"{r['verdict'] or '-':>7s} {fmt(r['target'], 6, 2)} {meets:>5s}{vs}{err}")
    if doc["conv_layers"]:
        print(f"\n{'conv layer (fwd+bwd, ms)':52s} {'tessera':>10s} {'torch':>10s} {'ratio':>6s} {'verdict':>7s}")
        for c in doc["conv_layers"]:
            print(f"{c['layer']:52s} {fmt(c['tessera'], 10)} {fmt(c['torch_eager'], 10)} {fmt(c['ratio'], 6)} "
                  f"{c['verdict'] or '-':>7s}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=os.environ.get("TESSERA_PYTHON", "/usr/bin/python3"),
                    help="the interpreter whose PyTorch (built with CUDA) runs bench/torch/cuda_micro.py")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--only", default="", help="only the rows whose name contains one of these comma-separated "
                                               "parts (a partial run)")
    ap.add_argument("--no-compile", dest="compile", action="store_false",
                    help="skip torch.compile (a partial run)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per program run")
    ap.add_argument("--out", default=None, help="default: bench/results/cuda-micro.json, or cuda-micro-partial.json "
                                                "for a partial run")
    args = ap.parse_args()
    partial = bool(args.only) or not args.compile or args.rounds < 3
    results = os.path.join(ROOT, "bench", "results")
    out = args.out or os.path.join(results, f"{SUITE}-partial.json" if partial else f"{SUITE}.json")
    if partial and os.path.abspath(out) == os.path.join(os.path.abspath(results), f"{SUITE}.json"):
        print(f"a partial run (--only, --no-compile or --rounds < 3) does not write {SUITE}.json", file=sys.stderr)
        return 2
    binary = os.path.join(args.build, "bench", "bench_cuda_micro")
    if not os.path.exists(binary):
        print(f"{binary} is missing: configure with the cuda preset and build the target bench_cuda_micro",
              file=sys.stderr)
        return 2
    raw = collect(args, binary)
    if not any(r[side]["rows"] for r in raw["rounds"] for side in ("tessera", "torch")):
        print("neither side ran", file=sys.stderr)
        return 2
    doc = build_document(raw)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print_table(doc)
    print(f"wrote {out}")
    return 0 if all(r["meets"] is not False for r in doc["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
