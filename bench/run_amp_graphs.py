#!/usr/bin/env python3
"""The amp-graphs suite (issue "Mixed precision, CUDA graphs and the profiler", Measured) on this
machine's GPU, written whole from one run into bench/results/amp-graphs.json in DESIGN.md's format, with
every raw sample. Builds nothing; needs build/bench/bench_cuda_graph, build/apps/tessera, a PyTorch with
CUDA (--python) and Fashion-MNIST (--data, else the train command's default folder).

CUDA graph rows: --rounds alternating rounds of tessera's process (bench/cuda/bench_cuda_graph.cpp) and
PyTorch's (bench/torch/cuda_graph.py), each timing --runs measurements of --iters back-to-back steps
(kept per round and side in the row's "samples"). Figures: medians over the rounds and their min-max;
ratio (higher is better for tessera): the median of the per-round ratios against PyTorch's same work,
spread their min-max, "parity" where the spread holds 1.0:
  200-op step (1024 f32), eager launch        PyTorch eager ms / tessera ms, no target;
  200-op step, CUDA graph replay               torch.cuda.graph replay ms / tessera's, no target; beside
                                               it each side's replay speedup over its eager launch;
  MLP 784-512-512-10 b128 SGD step, eager      tessera steps/s / PyTorch eager's, target 2.0;
  the same step, CUDA graph replay             tessera (cuda::make_graphed) / PyTorch's torch.cuda.graph
                                               replay of the same step, target 1.0.
torch.compile does not apply to these rows (see each row's note).
Accuracy row (not a timing): the CNN of `tessera train` on Fashion-MNIST, 6 epochs, batch 64, seed 0, on
the GPU in float32 and under bfloat16 autocast, after the timed rounds; its samples are both runs'
"test accuracy" lines and per-epoch accuracies; tessera is bf16's final test accuracy, the reference
float32's, difference_pp their difference (target: within 0.3 percentage points).
The GPU clocks are read before the first timed round and after the last. A side or training that fails
(non-zero exit, past its time limit) has null and an "error" in the row, and the run goes on.
A partial run (--skip-accuracy, or fewer than 3 rounds) writes bench/results/amp-graphs-partial.json and
never touches amp-graphs.json.

Exit status: 0 when every row with a target meets it, 1 otherwise, 2 when nothing ran.
usage: run_amp_graphs.py [--build build] [--python PY] [--rounds 3] [--runs 20] [--iters 50] [--data DIR]
                         [--skip-accuracy]
"""
import argparse
import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import (alternating_rounds, as_output, commit_id, fmt, gpu_environment, raw_last,  # noqa: E402
                      set_ratio, spread, summarize_sides)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITE = "amp-graphs"
EAGER_NOTE = ("PyTorch eager from Python; torch.compile does not apply: the row measures eager launches of the "
              "same ops (a compiled step would fuse them into other work)")
GRAPH_NOTE = ("both sides replay one captured graph of the same step; torch.compile's reduce-overhead mode (CUDA "
              "graphs of Inductor's fused kernels) is other work and not measured here")
NOTES = {"step200_eager": EAGER_NOTE, "step200_graph": GRAPH_NOTE, "mlp_784_512_512_10_b128_sgd_graph": GRAPH_NOTE,
         "mlp_784_512_512_10_b128_sgd_eager": EAGER_NOTE + "; libtorch's C++ figure of the same step is the "
                                              "libtorch column of libtorch-cuda.json (bench/run_libtorch.py)"}
# name -> (work, unit, PyTorch side, target, the eager row of a graph row)
GRAPH_ROWS = {
    "step200_eager": ("200-op step (1024 f32), eager launch", "ms/step", "torch_eager", None, None),
    "step200_graph": ("200-op step (1024 f32), CUDA graph replay", "ms/step", "torch_graph", None, "step200_eager"),
    "mlp_784_512_512_10_b128_sgd_eager": ("MLP 784-512-512-10 b128 SGD momentum f32 step, eager", "steps/s",
                                          "torch_eager", 2.0, None),
    "mlp_784_512_512_10_b128_sgd_graph": ("MLP 784-512-512-10 b128 SGD momentum f32 step, CUDA graph replay",
                                          "steps/s", "torch_graph", 1.0, "mlp_784_512_512_10_b128_sgd_eager"),
}
HIGHER_IS_BETTER = {"ms/step": False, "steps/s": True}
TORCH_NAMES = {"torch_eager": "torch eager", "torch_graph": "torch.cuda.graph replay"}
EPOCHS = 6
ACCURACY_WORK = f"CNN Fashion-MNIST test accuracy after {EPOCHS} epochs, bf16 autocast vs float32 (percentage points)"
ACCURACY_BOUND_PP = 0.3
ACC = re.compile(r"test accuracy ([0-9.]+)%")
METHOD = ("CUDA graph rows: alternating processes per round (tessera, then PyTorch); a side's figure of a round "
          "is its program's median over runs measurements of iters steps (samples_ms: ms per step); figures: "
          "median over rounds, min and max; ratio: median of the per-round ratios, spread their min and max, "
          "parity where the spread holds 1.0. Accuracy row: one float32 and one bf16-autocast training")


# ---------------------------------------------------------------------------------------------------
# Program outputs -> the document (pure: the results check's self-test builds documents with it).

def outputs(rnd, name, torch_side):
    def side(run, program):
        line = run["rows"].get(name)
        if line:
            return as_output(line)
        return {"value": None, "error": run["error"] or f"{program} printed no row {name}"}
    return {"tessera": side(rnd["tessera"], "bench_cuda_graph"), torch_side: side(rnd["torch"], "cuda_graph.py")}


def graph_row(name, per_round, eager_rounds):
    work, unit, torch_side, target, eager_row = GRAPH_ROWS[name]
    higher = HIGHER_IS_BETTER[unit]
    row = {"work": work, "name": name, "unit": unit}
    summarize_sides(row, per_round, ["tessera", torch_side])
    row.update({"torch_compile": None, "libtorch": None, "reference": TORCH_NAMES[torch_side]})
    ref_rounds = row[torch_side + "_rounds"]
    row["reference_value"], row["reference_min"], row["reference_max"] = spread(ref_rounds)
    set_ratio(row, "ratio", row["tessera_rounds"], ref_rounds, higher)
    row["target"] = target
    row["meets"] = None if target is None else (row["ratio"] is not None and row["ratio"] >= target)
    if eager_row:
        # How much faster each side's replay is than its own eager launch, per round.
        row["eager_row"] = eager_row
        for key, graph, eager in (("replay_speedup", row["tessera_rounds"], eager_rounds[eager_row]["tessera"]),
                                  ("torch_replay_speedup", ref_rounds, eager_rounds[eager_row]["torch_eager"])):
            tmp = {}
            set_ratio(tmp, "ratio", graph, eager, higher)
            row[key] = tmp["ratio"]
    row["note"] = NOTES[name]
    return raw_last(row)


def accuracy_run(run):
    """One training's samples from its output: {"command", "data" (the files' SHA-256, or None for the train
    command's default folder), "seconds", "accuracy_lines", "epoch_accuracies", "error"}."""
    lines = [line.strip() for line in (run.get("stdout") or "").splitlines() if ACC.search(line)]
    accs = [float(x) for line in lines for x in ACC.findall(line)]
    error = run.get("error")
    if not error and len(accs) != EPOCHS:
        error = f"tessera train printed {len(accs)} test accuracies of {EPOCHS} epochs"
    return {"command": run.get("command"), "data": run.get("data"), "seconds": run.get("seconds"),
            "accuracy_lines": lines, "epoch_accuracies": accs, "error": error}


def accuracy_row(runs):
    samples = {mode: accuracy_run(runs[mode]) for mode in ("float32", "bf16")}
    final = {m: (s["epoch_accuracies"][-1] if len(s["epoch_accuracies"]) == EPOCHS else None)
             for m, s in samples.items()}
    diff = round(final["bf16"] - final["float32"], 4) if None not in final.values() else None
    return {"work": ACCURACY_WORK, "name": "cnn_fashion_mnist_bf16_autocast_accuracy", "unit": "%",
            "tessera": final["bf16"], "reference": "tessera float32", "reference_value": final["float32"],
            "ratio": None, "difference_pp": diff, "target": f"|difference| <= {ACCURACY_BOUND_PP} pp",
            "meets": diff is not None and abs(diff) <= ACCURACY_BOUND_PP, "epochs": EPOCHS, "torch_eager": None,
            "torch_compile": None, "libtorch": None, "peak_mem_gib": None,
            "errors": {m: s["error"] for m, s in samples.items() if s["error"]}, "samples": samples}


def build_document(raw):
    """The results document of one run. raw: {"rounds": [{"tessera": side, "torch": side}] where side is
    {"header", "rows" (name -> the program's line), "error" (None or why the process failed)}, "accuracy"
    (None when skipped, else {"float32": run, "bf16": run}, run = {"command", "data", "stdout", "seconds", "error"}),
    "env" (bench_io.gpu_environment()), "clocks_before", "clocks_after" (bench_io.gpu_clocks()), "commit",
    "date", "runs", "iters"}."""
    rounds = raw["rounds"]
    per_name = {name: [outputs(r, name, spec[2]) for r in rounds] for name, spec in GRAPH_ROWS.items()}
    eager_rounds = {}
    for name, (_, _, torch_side, _, eager_row) in GRAPH_ROWS.items():
        if eager_row is None:
            tmp = {}
            summarize_sides(tmp, per_name[name], ["tessera", torch_side])
            eager_rounds[name] = {"tessera": tmp["tessera_rounds"], "torch_eager": tmp[torch_side + "_rounds"]}
    rows = [graph_row(name, per_name[name], eager_rounds) for name in GRAPH_ROWS]
    if raw["accuracy"] is not None:
        rows.append(accuracy_row(raw["accuracy"]))
    header = {}
    for r in rounds:
        header.update(r["tessera"]["header"])
    env = dict(raw["env"])
    if not env.get("device"):
        env["device"] = header.get("device")
    return {"suite": SUITE, "partial": raw["accuracy"] is None or len(rounds) < 3, "commit": raw["commit"],
            "date": raw["date"], **env, "clocks_before": raw["clocks_before"], "clocks_after": raw["clocks_after"],
            "rounds": len(rounds), "runs": raw["runs"], "iters": raw["iters"], "method": METHOD, "rows": rows}


# ---------------------------------------------------------------------------------------------------
# The run.

def data_identity(folder):
    """The Fashion-MNIST files by content: {file name: SHA-256}. The record names the data this way, not
    by the folder's path, which belongs to the machine that ran it."""
    out = {}
    for name in sorted(os.listdir(folder)) if folder and os.path.isdir(folder) else []:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def train(build, amp, data, timeout):
    cmd = [os.path.join(build, "apps", "tessera"), "train", "--model", "cnn", "--epochs", str(EPOCHS),
           "--batch-size", "64", "--seed", "0", "--device", "cuda", "--amp", amp]
    if data:
        cmd += ["--data", "fashion-mnist:" + data]
    print(f"==> accuracy, --amp {amp}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    recorded = cmd[1:-1] + ["fashion-mnist:DATA"] if data else cmd[1:]  # DATA: the files of "data"
    run = {"command": recorded, "data": data_identity(data) if data else None, "stdout": "", "error": None}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        run["stdout"] = p.stdout
        if p.returncode != 0:
            last = [line for line in p.stderr.splitlines() if line.strip()]
            run["error"] = f"tessera train: exit status {p.returncode}" + (
                f": {last[-1].strip()[:300]}" if last else "")
    except subprocess.TimeoutExpired as e:
        run["stdout"] = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        run["error"] = f"tessera train: stopped after {timeout} s"
    except OSError as e:
        run["error"] = f"tessera train: could not run: {e}"
    run["seconds"] = round(time.monotonic() - t0, 1)
    print(f"    {run['seconds']} s" + (f"; {run['error']}" if run["error"] else ""), file=sys.stderr, flush=True)
    return run


def collect(args):
    ts_cmd = [os.path.join(args.build, "bench", "bench_cuda_graph"), "--runs", str(args.runs),
              "--iters", str(args.iters)]
    pt_cmd = [args.python, os.path.join(ROOT, "bench", "torch", "cuda_graph.py"), "--runs", str(args.runs),
              "--iters", str(args.iters)]
    raw = {"env": gpu_environment(args.python), "commit": commit_id(ROOT), "runs": args.runs, "iters": args.iters,
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "rounds": []}
    alternating_rounds(raw, (("tessera", ts_cmd, "bench_cuda_graph"), ("torch", pt_cmd, "cuda_graph.py")),
                       args.rounds, args.timeout)
    raw["accuracy"] = None if args.skip_accuracy else {
        mode: train(args.build, amp, args.data, args.train_timeout)
        for mode, amp in (("float32", "off"), ("bf16", "bf16"))}
    return raw


def print_table(doc):
    print(f"{doc['device']}  driver {doc['driver']}  torch {doc['torch']}  commit {doc['commit']}  "
          f"{doc['rounds']} rounds" + ("  (partial)" if doc["partial"] else ""))
    print(f"{'work':66s} {'unit':>8s} {'tessera':>10s} {'reference':>24s} {'value':>10s} {'ratio':>6s} "
          f"{'min-max':>13s} {'verdict':>7s} {'target':>6s} {'meets':>5s}")
    for r in doc["rows"]:
        meets = "-" if r["meets"] is None else ("yes" if r["meets"] else "NO")
        err = f"  errors: {'; '.join(f'{k}: {v[:60]}' for k, v in r['errors'].items())}" if r["errors"] else ""
        if r["unit"] == "%":
            d = r["difference_pp"]
            print(f"{r['work'][:66]:66s} {r['unit']:>8s} {fmt(r['tessera'], 10, 2)} {r['reference']:>24s} "
                  f"{fmt(r['reference_value'], 10, 2)}  difference {fmt(d, 6, 2).strip()} pp "
                  f"(target {r['target']}) meets {meets}{err}")
            continue
        spread_ = f"{fmt(r['ratio_min'], 6)}-{fmt(r['ratio_max'], 6).strip()}" if r["ratio"] else "-"
        speedup = (f"  replay speedup {fmt(r['replay_speedup'], 0, 2)} (PyTorch {fmt(r['torch_replay_speedup'], 0, 2)})"
                   if "replay_speedup" in r else "")
        print(f"{r['work'][:66]:66s} {r['unit']:>8s} {fmt(r['tessera'], 10)} {r['reference']:>24s} "
              f"{fmt(r['reference_value'], 10)} {fmt(r['ratio'], 6)} {spread_:>13s} {r['verdict'] or '-':>7s} "
              f"{fmt(r['target'], 6, 2)} {meets:>5s}{speedup}{err}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=os.environ.get("TESSERA_PYTHON", sys.executable),
                    help="the interpreter whose PyTorch (built with CUDA) runs bench/torch/cuda_graph.py")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--data", default="", help="the Fashion-MNIST folder (default: the train command's own)")
    ap.add_argument("--skip-accuracy", action="store_true", help="no accuracy row (a partial run)")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per benchmark program run")
    ap.add_argument("--train-timeout", type=int, default=240, help="seconds per training")
    ap.add_argument("--out", default=None, help="default: bench/results/amp-graphs.json, or amp-graphs-partial.json "
                                                "for a partial run")
    args = ap.parse_args()
    args.runs, args.iters = max(1, args.runs), max(1, args.iters)  # as bench_cuda_graph takes them
    partial = args.skip_accuracy or args.rounds < 3
    results = os.path.join(ROOT, "bench", "results")
    out = args.out or os.path.join(results, f"{SUITE}-partial.json" if partial else f"{SUITE}.json")
    if partial and os.path.abspath(out) == os.path.join(os.path.abspath(results), f"{SUITE}.json"):
        print(f"a partial run (--skip-accuracy or --rounds < 3) does not write {SUITE}.json", file=sys.stderr)
        return 2
    binary = os.path.join(args.build, "bench", "bench_cuda_graph")
    if not os.path.exists(binary):
        print(f"{binary} is missing: configure with the cuda preset and build the target bench_cuda_graph",
              file=sys.stderr)
        return 2
    raw = collect(args)
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
