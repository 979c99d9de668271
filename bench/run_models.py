#!/usr/bin/env python3
"""Runs tessera's model benchmarks (build/bench/bench_models) against the same work in PyTorch
(bench/torch/models.py: eager, torch.compile in Inductor's default mode, and torch.compile
mode="max-autotune" for the GPT-2 and ResNet-50 training rows) on this machine's GPU, in alternating
rounds, prints ONE table and writes ONE file: bench/results/models.json, whole, from this run at one
commit, with every raw sample (DESIGN.md, "Performance method"). A partial run (--only, or a run cut
short: some side without samples in some round) writes models-partial.json beside it, naming the holes in
'incomplete', and never touches models.json. Builds nothing.

Rows (ratio oriented so that higher is better for tessera; reference: the fastest PyTorch side):
  GPT-2 124M training tokens/s, vocabulary 50304 on both sides   (the headline row, target 1.0)
    tessera's default loss, GPT2::loss (the chunked classifier + cross-entropy, linear_cross_entropy);
    PyTorch's model takes the (B T, V) logits and F.cross_entropy;
  GPT-2 124M training, vocabulary 50304, both sides through the full logits (bench_models' :logits row;
    PyTorch's program is the same as the headline row's, so the row holds the same PyTorch samples);
  GPT-2 124M training, vocabulary 50257 (GPT-2's own) on both sides;
  ResNet-50 training images/s                                     (target 1.0);
  a peak-memory row (GiB, lower is better) after each of those four, against the PyTorch side that is
    the reference of its throughput row;
  MLP 784-512-512-10 step steps/s (eager and default compile; no target here: amp-graphs has it);
  causal attention fwd+bwd ms, two shapes (eager and default compile, F.scaled_dot_product_attention);
  with --parity (or --only parity): the GPT-2 loss-curve parity rows (bench/gpt2_loss_parity.py), one per
    config, 2% / (max relative difference of the 10-step mean losses), both curves kept.
Every side runs the same model, vocabulary, dtype (bf16 autocast), optimizer (fused AdamW for GPT-2,
fused SGD for ResNet-50 and the MLP) and batch; the two programs' module comments say how.

Method (also in the file's "method"): each round runs tessera, PyTorch eager, torch.compile and
max-autotune, one process each, in that order (--rounds, default 3). A process times a row after its
warm-up steps: --runs measurements of --iters back-to-back steps between CUDA events; the row keeps each
measurement (ms per step) as raw samples, per round and side. A round's figure is the median of its
samples in the row's unit; a row's figure is the median over the rounds, min-max beside it; the ratio's
spread pairs the two sides' extreme round figures, and a spread that holds 1.0 is "parity" (the table
says so). Inductor's on-disk caches persist between processes on the same machine: the first
torch.compile and max-autotune processes pay compilation and autotuning (each row's "warmup_s", the
header's "processes" with the cache state each found), later rounds load them.

Time: the default run takes about 9 minutes on the H200 with Inductor's caches warm and 15 to 16 with them
cold, by estimate from PyTorch's processes measured there (eager 38 s cold, 24 warm; torch.compile 123 s
cold, 37 warm; max-autotune's ResNet-50 243 s cold, 62 warm; its GPT-2 rows and tessera's process, about
20 s, not measured). --budget-min (default 15) bounds it, so that on a cold machine the last rows of the
third max-autotune process may not run (they say so): a process's time limit is the smaller of --timeout and what is left
of the budget, a process stopped at its limit keeps the rows it printed (GPT-2's headline row first), and
a process for which no time is left does not run (its rows record why). max-autotune searches cuBLAS
and cuDNN alone by default (--max-autotune-search aten; its CUDA graphs and its tuning of its own
kernels stay): the full search, Triton GEMM and convolution templates too, took 365 s cold for GPT-2's
step alone on the H200 and kept cuBLAS for 13 of its 15 GEMMs (the other two, about 0.3% of the step),
and for ResNet-50 autotunes each 1x1 convolution as a GEMM at 20-30 s a shape, past 10 minutes;
--max-autotune-search full restores it where the time allows. The loss-curve parity runs (two
processes of about a minute each, estimated, with transformers' GPT-2) are not in the default run:
--only parity runs them alone (models-partial.json), --parity adds them to a whole run.
--warm-caches-only runs the torch.compile and max-autotune processes once, to fill Inductor's caches
beside a build (Note [Warming Inductor's caches]); it measures and writes nothing.

The file is written at the end only, atomically (a temporary file, then os.replace), so that the run may
be started in the background and polled:
  setsid nohup python3 bench/run_models.py --build build > models.log 2>&1 &
Progress goes to stderr, flushed, with each program's output lines. tests/bench/test_results.py
(check_models) re-derives every figure of the file from its raw samples; build_document() below is the
pure function from the raw samples to the file, which tests/bench/test_models_writer.py checks.
Exit status: 0 when every row with a target meets it, 1 otherwise, 2 when tessera's side did not run.
"""
import argparse
import datetime
import getpass
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id, gpu_clocks, gpu_environment, json_lines, verdict  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 1024.0 ** 3
SUITE = "models"

SIDES = ("tessera", "torch_eager", "torch_compile", "torch_max_autotune")
TORCH_SIDES = SIDES[1:]
# max-autotune's search (--max-autotune-search): "aten" narrows Inductor's GEMM and convolution choices
# to cuBLAS and cuDNN (its CUDA graphs and its tuning of its own kernels stay), "full" is Inductor's default.
AUTOTUNE_SEARCH = {"aten": ["--inductor", ":max_autotune_gemm_backends=ATEN",
                            "--inductor", ":max_autotune_conv_backends=ATEN"], "full": []}


def side_labels(st):
    """The sides' names as the rows' "reference" gives them."""
    search = {"aten": "GEMMs and convolutions from cuBLAS and cuDNN", "full": "Inductor's full search"}
    return {"tessera": "tessera", "torch_eager": "PyTorch eager",
            "torch_compile": "PyTorch torch.compile (default mode)",
            "torch_max_autotune": f"PyTorch torch.compile max-autotune ({search[st['max_autotune_search']]})"}
RATE_UNITS = ("tokens/s", "images/s", "steps/s")  # higher is better; "ms" and "GiB": lower is better
ENV_KEYS = ("device", "driver", "cuda", "torch", "torch_cuda", "cudnn", "nccl")
PARITY_SHAPES = {"small": (16, 256), "124m": (8, 512)}  # batch, sequence of each loss-curve run
PARITY_WINDOW = 10     # gpt2_loss_parity.py's WINDOW: the curves are compared as 10-step means
PARITY_TARGET = 0.02   # and its TARGET: 2% of PyTorch's
PARITY_TEXTS = {"python": "Python's sources", "markov": "Markov text"}
# A process's expected time with warm caches, for the progress line's estimate of what is left.
EST_S = {"tessera": 20, "torch_eager": 30, "torch_compile": 40, "torch_max_autotune": 95, "parity": 90}


# ---------------------------------------------------------------------------------------------------
# The rows: what each one runs on each side.

def row_specs(st):
    """The timed rows of a full run, in the file's order, from the settings `st`: key, work, unit, the
    tessera and PyTorch programs' row names, the PyTorch sides, items per step (None: a time row), the
    target, whether a peak-memory row follows, and what the tessera program needs (--gpt-rows)."""
    B, T, RB = st["gpt_batch"], st["gpt_seq"], st["resnet_batch"]
    on = {"torch_eager": True, "torch_compile": st["compile"], "torch_max_autotune": st["max_autotune"]}
    every, no_autotune = tuple(s for s in TORCH_SIDES if on[s]), tuple(s for s in TORCH_SIDES[:2] if on[s])
    gpt = f"gpt2_124m_train_b{B}x{T}"
    common = f"batch {B} x {T}, bf16 autocast, fused AdamW, clip 1.0"
    specs = [
        dict(key="gpt2_v50304", ts=f"{gpt}_v50304", pt=f"{gpt}_v50304", gpt_row="50304", vocab=50304,
             work=f"GPT-2 124M training, vocabulary 50304, {common}, tessera's fused classifier + cross-entropy"),
        dict(key="gpt2_v50304_logits", ts=f"{gpt}_v50304_logits", pt=f"{gpt}_v50304", gpt_row="50304:logits",
             vocab=50304, work=f"GPT-2 124M training, vocabulary 50304, {common}, full logits then cross-entropy "
             "on both sides"),
        dict(key="gpt2_v50257", ts=gpt, pt=gpt, gpt_row="50257", vocab=50257,
             work=f"GPT-2 124M training, vocabulary 50257, {common}, tessera's fused classifier + cross-entropy"),
    ]
    for s in specs:
        s.update(unit="tokens/s", items=B * T, sides=every, target=1.0, peak=True)
    specs.append(dict(key="resnet50", ts=f"resnet50_train_b{RB}_224_cl_bf16", pt=f"resnet50_train_b{RB}_224_cl_bf16",
                      work=f"ResNet-50 training, batch {RB}, 224x224, channels-last, bf16 autocast, fused SGD momentum",
                      unit="images/s", items=RB, sides=every, target=1.0, peak=True))
    specs.append(dict(key="mlp", ts="mlp_784_512_512_10_b128_sgd", pt="mlp_784_512_512_10_b128_sgd",
                      work="MLP 784-512-512-10 b128 f32 fused SGD momentum step", unit="steps/s", items=1,
                      sides=no_autotune, target=None, peak=False))
    for (b, h, t, d) in ATTENTION_SHAPES:
        name = f"attention_causal_fwd_bwd_bf16_b{b}_h{h}_t{t}_d{d}"
        specs.append(dict(key=f"attention_t{t}_d{d}", ts=name, pt=name, shape=[b, h, t, d],
                          work=f"causal attention fwd+bwd bf16 B{b} H{h} T{t} D{d}", unit="ms", items=None,
                          sides=no_autotune, target=1.0, peak=False))
    return specs


ATTENTION_SHAPES = ((16, 12, 1024, 64), (8, 16, 2048, 128))


def attention_flops(shape):
    """FLOPs of one causal attention forward + backward: forward 2 matmuls of 2 B H T^2 D, backward 5; causal
    halves them (bench_models' count)."""
    b, h, t, d = shape
    return 7.0 * 2.0 * b * h * d * t * t / 2.0


def only_parts(only):
    return [p for p in (only or "").split(",") if p]


def selected_specs(st):
    parts = only_parts(st["only"])
    if not parts:
        return row_specs(st)
    return [s for s in row_specs(st) if any(p in s["ts"] or p in s["key"] for p in parts)]


def parity_selected(st):
    return ("parity" in only_parts(st["only"])) if st["only"] else st["parity"]


# ---------------------------------------------------------------------------------------------------
# Samples -> document: a pure function of the raw data of one run.

def higher_is_better(unit):
    return unit in RATE_UNITS


def per_round(unit, items, samples):
    """A round's figure in the row's unit from its samples (ms per step)."""
    ms = statistics.median(samples)
    return items * 1000.0 / ms if higher_is_better(unit) else ms


def oriented(unit, tessera, other):
    """The ratio, higher is better for tessera."""
    return tessera / other if higher_is_better(unit) else other / tessera


def ratio_spread(unit, ts, ref):
    """(min, max) of the ratio over every pairing of the two sides' round figures."""
    if higher_is_better(unit):
        return min(ts) / max(ref), max(ts) / min(ref)
    return min(ref) / max(ts), max(ref) / min(ts)


def best_side(unit, medians):
    """The fastest side of {side: median or None} (the first of equals), or None."""
    have = [(s, v) for s, v in medians.items() if v is not None]
    if not have:
        return None
    pick = max if higher_is_better(unit) else min
    return pick(have, key=lambda sv: sv[1])[0]


def raw_entry(proc, name):
    """One side's raw output for one row in one round: {"samples_ms", "peak_mem_bytes", "warmup_s"}, or
    {"error"} saying why there is none."""
    if proc is None:
        return {"error": "not run"}
    out = proc["rows"].get(name)
    samples = out.get("samples_ms") if out else None
    if isinstance(samples, list) and samples:
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in samples):
            return {"error": f"samples that are not positive numbers: {samples}"}
        peak, warm = out.get("peak_mem_bytes"), out.get("warmup_s")
        number = lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0  # noqa: E731
        return {"samples_ms": samples, "peak_mem_bytes": peak if number(peak) and isinstance(peak, int) else None,
                "warmup_s": warm if number(warm) else None}
    if out and out.get("error"):
        return {"error": out["error"]}
    if proc["status"] == "ok":
        return {"error": "the program printed no such row"}
    return {"error": f"no output for this row: {proc['status']}"}


def summarize(r, prefix, xs):
    """r[prefix], r[prefix_min], r[prefix_max]: median and range of xs, or None."""
    r[prefix] = statistics.median(xs) if xs else None
    r[prefix + "_min"] = min(xs) if xs else None
    r[prefix + "_max"] = max(xs) if xs else None


def compare(r, unit, sides, figures, target, labels, reference=None):
    """The reference, ratio, spread, verdict and meets of a row whose figures per side are `figures`
    ({side: [round figures]}). reference: a list holding the side to compare with (a peak-memory row
    passes its throughput row's, which may be None), else the fastest PyTorch side by median."""
    medians = {s: (statistics.median(figures[s]) if figures[s] else None) for s in sides}
    if reference is None:
        ref = best_side(unit, medians)
    else:
        ref = reference[0] if medians.get(reference[0]) is not None else None
    ts = figures["tessera"]
    r["reference_side"] = ref
    r["reference"] = labels[ref] if ref else None
    r["reference_value"] = medians[ref] if ref else None
    r["reference_min"] = min(figures[ref]) if ref else None
    r["reference_max"] = max(figures[ref]) if ref else None
    if ts and ref:
        r["ratio"] = oriented(unit, statistics.median(ts), medians[ref])
        r["ratio_min"], r["ratio_max"] = ratio_spread(unit, ts, figures[ref])
        r["verdict"] = verdict(r["ratio_min"], r["ratio_max"])
    else:
        r["ratio"] = r["ratio_min"] = r["ratio_max"] = r["verdict"] = None
    r["ratios"] = {s: oriented(unit, statistics.median(ts), medians[s])
                   for s in sides if ts and medians[s] is not None}
    r["target"] = target
    r["meets"] = None if target is None else (r["ratio"] is not None and r["ratio"] >= target)


def timed_row(spec, rounds, labels):
    """A throughput (or time) row: its raw rounds and every figure derived from them."""
    sides = ("tessera",) + tuple(spec["sides"])
    raw = [{s: raw_entry(rd.get(s), spec["ts"] if s == "tessera" else spec["pt"]) for s in sides} for rd in rounds]
    unit, items = spec["unit"], spec["items"]
    figures = {s: [per_round(unit, items, e[s]["samples_ms"]) for e in raw if "samples_ms" in e[s]] for s in sides}
    r = {"work": spec["work"], "unit": unit, "key": spec["key"],
         "programs": {"tessera": spec["ts"], "torch": spec["pt"]}, "sides": list(spec["sides"]),
         "items_per_step": items}
    if "shape" in spec:
        r["shape"] = spec["shape"]
    r["rounds"] = raw
    for s in SIDES:
        summarize(r, s, figures[s] if s in sides else [])
    compare(r, unit, spec["sides"], figures, spec["target"], labels)
    peaks = [e["tessera"]["peak_mem_bytes"] / GIB for e in raw
             if "samples_ms" in e["tessera"] and isinstance(e["tessera"].get("peak_mem_bytes"), (int, float))]
    r["peak_mem_gib"] = statistics.median(peaks) if peaks else None
    r["libtorch"] = None
    if "shape" in spec:
        flops = attention_flops(spec["shape"])
        r["tflops"] = {s: flops / (r[s] * 1e9) for s in sides if r[s]}
    r["errors"] = {s: next(e[s]["error"] for e in reversed(raw) if "error" in e[s])
                   for s in sides if any("error" in e[s] for e in raw)}
    return r


def peak_row(spec, of, labels):
    """The peak memory of a throughput row's timed steps (GiB), against the PyTorch side that is that row's
    reference."""
    sides = ("tessera",) + tuple(spec["sides"])
    raw = [{s: (e[s].get("peak_mem_bytes") if "samples_ms" in e[s] else None) for s in sides} for e in of["rounds"]]
    figures = {s: [e[s] / GIB for e in raw if isinstance(e[s], (int, float))] for s in sides}
    r = {"work": f"{spec['work']}: peak memory", "unit": "GiB", "key": spec["key"] + "_peak", "of": of["work"],
         "sides": list(spec["sides"]), "rounds": raw}
    for s in SIDES:
        summarize(r, s, figures[s] if s in sides else [])
    compare(r, "GiB", spec["sides"], figures, 1.0, labels, reference=[of["reference_side"]])
    r["peak_mem_gib"] = r["tessera"]
    r["libtorch"] = None
    return r


def parity_work(config, st):
    batch, seq = PARITY_SHAPES[config]
    text = PARITY_TEXTS.get(st["parity_text"], os.path.basename(st["parity_text"]))
    return (f"GPT-2 loss-curve parity ({config} config, b{batch}x{seq}, {text}, {st['parity_steps']} steps, "
            "same weights and batches)")


def smoothed(xs, w=PARITY_WINDOW):
    return [sum(xs[i:i + w]) / len(xs[i:i + w]) for i in range(0, len(xs), w)]


def max_rel_diff(ts, pt):
    """gpt2_loss_parity.compare: the largest relative difference of the two curves' 10-step means."""
    return max(abs(a - b) / abs(b) for a, b in zip(smoothed(ts), smoothed(pt)))


def parity_row(config, st, result):
    """A loss-curve parity row from gpt2_loss_parity.py's result ({"tessera", "torch", "torch_model"}: the
    two curves, unrounded) or {"error"}."""
    batch, seq = PARITY_SHAPES[config]
    r = {"work": parity_work(config, st), "unit": "max rel diff", "key": f"parity_{config}", "config": config,
         "batch": batch, "seq": seq, "steps": st["parity_steps"], "window": PARITY_WINDOW}
    ok = "error" not in result
    if ok:
        r.update(curve_tessera=result["tessera"], curve_torch=result["torch"], torch_model=result.get("torch_model"))
    else:
        r["error"] = result["error"]
    d = max_rel_diff(result["tessera"], result["torch"]) if ok else None
    r.update(tessera=d, reference=f"{PARITY_TARGET:.0%} of PyTorch's {PARITY_WINDOW}-step mean loss",
             reference_value=PARITY_TARGET, ratio=PARITY_TARGET / max(d, 1e-12) if ok else None, target=1.0)
    r["meets"] = r["ratio"] is not None and r["ratio"] >= 1.0
    r.update(torch_eager=None, torch_compile=None, torch_max_autotune=None, libtorch=None, peak_mem_gib=None,
             errors={} if ok else {"parity": result["error"]})
    return r


def method_text(st):
    """The header's "method": how every figure of the file was measured and derived."""
    return (
        f"Each of {st['rounds']} rounds runs tessera (bench/bench_models), then PyTorch eager, torch.compile "
        "(Inductor's default mode) and torch.compile mode=max-autotune (bench/torch/models.py; the GPT-2 and "
        "ResNet-50 training rows only), one process each, in that order. A process times each row after "
        f"{st['warmup']} warm-up steps (torch.compile compiles in them; at least 3 when compiling): {st['runs']} "
        f"measurements of {st['iters']} back-to-back steps (50 for the MLP) between CUDA events; rounds[i][side]"
        ".samples_ms holds each measurement in ms per step. A round's figure is the median of its samples in the "
        "row's unit (items_per_step * 1000 / ms for a rate); a figure is the median over the rounds, with its "
        "min and max. The reference is the fastest PyTorch side of the row by median; ratio = tessera / reference "
        "for a rate, reference / tessera for ms and GiB; ratio_min and ratio_max pair the two sides' extreme "
        "round figures, and a spread that holds 1.0 is parity. A peak-memory row (torch.cuda.max_memory_allocated "
        "and tessera's allocated_bytes.all.peak over the timed steps, per round) takes the reference side of its "
        "throughput row. Inductor's on-disk caches persist between processes on the same machine: the first "
        "torch.compile and max-autotune processes (round 1) pay compilation and autotuning, recorded in each "
        "row's warmup_s, and later rounds load them (processes[i][side].inductor_cache: whether Inductor's cache "
        "folder held entries when the process began; entries of the default mode hold no max-autotune "
        "results); every round's timed steps come after its warm-up. Under max-autotune (CUDA graphs) the peak "
        "is taken from the second warm-up step on, since replays allocate nothing. max-autotune's search: "
        f"{st['max_autotune_search']} (aten: GEMMs and convolutions from cuBLAS and cuDNN, Inductor's CUDA graphs "
        "and its tuning of its own kernels kept; full: Inductor's default, Triton templates too). Each process "
        "runs under a "
        f"time limit: the smaller of {st['timeout_s']} s and what is left of the run's {st['budget_min']}-minute "
        "budget (0: none); a process stopped at its limit keeps the rows it printed, and a row without output "
        "records its error.")


def build_document(run):
    """The results file of one run, from its raw data alone:
    run = {"settings": {...}, "rounds": [{side: process or absent}], "parity": {config: result},
           "env": gpu_environment(), "clocks_before", "clocks_after", "commit", "date", "wall_s",
           "processes": [{side: {status, s, timeout_s, inductor_cache, header}} per round],
           "parity_processes": [{config, status, s, timeout_s}]}
    where a process is {"rows": {program row name: its output object}, "status": "ok" or why not}."""
    st = run["settings"]
    rows = []
    labels = side_labels(st)
    for spec in selected_specs(st):
        r = timed_row(spec, run["rounds"], labels)
        rows.append(r)
        if spec["peak"]:
            rows.append(peak_row(spec, r, labels))
    for config, result in run.get("parity", {}).items():
        rows.append(parity_row(config, st, result))
    # Note [A whole models run]: models.json holds a run where every timed row has every side's samples in
    # every round; a run cut short (the budget spent, a process stopped or failed before a row) is a
    # partial run, written to models-partial.json with the holes named in 'incomplete'.
    incomplete = [f"{r['key']} round {i + 1} {s}: {e[s]['error']}" for r in rows if "items_per_step" in r
                  for i, e in enumerate(r["rounds"]) for s in ["tessera"] + r["sides"] if "samples_ms" not in e[s]]
    doc = {"suite": SUITE, "partial": bool(st["only"] or incomplete), "only": st["only"] or None,
           "incomplete": incomplete, "commit": run["commit"], "date": run["date"]}
    doc.update({k: run["env"].get(k) for k in ENV_KEYS})
    doc.update(clocks_before=run["clocks_before"], clocks_after=run["clocks_after"], rounds=len(run["rounds"]),
               runs_per_round=st["runs"], iters_per_run=st["iters"], warmup_steps=st["warmup"],
               settings={k: st[k] for k in ("gpt_batch", "gpt_seq", "resnet_batch", "compile", "max_autotune",
                                            "max_autotune_search", "timeout_s", "budget_min", "parity",
                                            "parity_steps", "parity_text")},
               sides=labels, wall_s=run["wall_s"], processes=run["processes"],
               parity_processes=run.get("parity_processes", []), method=method_text(st), rows=rows)
    return doc


# ---------------------------------------------------------------------------------------------------
# Running the programs.

def inductor_cache_state():
    """"warm" when Inductor's cache folder holds entries, else "cold" (the folder torch uses by default)."""
    d = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not d:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        d = os.path.join(tempfile.gettempdir(), "torchinductor_" + user)
    return "warm" if os.path.isdir(d) and os.listdir(d) else "cold"


def run_process(cmd, what, timeout):
    """Runs cmd in its own session under `timeout` seconds, echoing its output to stderr as it comes.
    Returns {"header", "rows" (the JSON lines printed, kept when it is stopped), "status", "s"}."""
    print(f"==> {what}: {' '.join(cmd)} (limit {timeout:.0f} s)", file=sys.stderr, flush=True)
    start = time.monotonic()
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                             start_new_session=True)
    except OSError as e:
        return {"header": {}, "rows": {}, "status": f"could not run: {e}", "s": 0.0}
    out, err = [], []

    def pump(stream, keep):
        for line in stream:
            keep.append(line)
            print(f"    {line.rstrip()[:400]}", file=sys.stderr, flush=True)

    # Daemon threads: a worker the program left behind holding its pipes does not hold this run up.
    threads = [threading.Thread(target=pump, args=(p.stdout, out), daemon=True),
               threading.Thread(target=pump, args=(p.stderr, err), daemon=True)]
    for t in threads:
        t.start()
    try:
        rc = p.wait(timeout=timeout)
        status = "ok" if rc == 0 else f"exit status {rc}: " + "".join(err[-5:]).strip()[-500:]
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # its own session: Inductor's compile workers with it
        except OSError:
            pass
        p.wait()
        status = f"stopped at its time limit ({timeout:.0f} s)"
    for t in threads:
        t.join(timeout=30)
    header, rows = json_lines("".join(out))
    s = time.monotonic() - start
    print(f"    {what}: {status.splitlines()[0] if status else status} after {s:.1f} s, {len(rows)} rows",
          file=sys.stderr, flush=True)
    return {"header": header, "rows": rows, "status": status, "s": s}


class Budget:
    """What is left of the run's time; a process's limit is the smaller of --timeout and that."""

    def __init__(self, minutes, cap):
        self.start, self.total, self.cap = time.monotonic(), minutes * 60.0, cap

    def elapsed(self):
        return time.monotonic() - self.start

    def limit(self):
        """The next process's time limit in seconds, or None when the budget is spent."""
        if self.total <= 0:
            return self.cap
        left = self.total - self.elapsed()
        return min(self.cap, left) if left >= 20 else None


def side_commands(a, specs):
    """{side: command} for the sides that have rows to run."""
    common = ["--runs", str(a.runs), "--iters", str(a.iters), "--warmup", str(a.warmup), "--gpt-batch",
              str(a.gpt_batch), "--gpt-seq", str(a.gpt_seq), "--resnet-batch", str(a.resnet_batch)]
    cmds = {}
    if specs:
        gpt_rows = [s["gpt_row"] for s in specs if "gpt_row" in s]
        cmds["tessera"] = ([os.path.join(a.build, "bench", "bench_models")] + common +
                           (["--gpt-rows", ",".join(gpt_rows)] if gpt_rows else []) +
                           ["--only", ",".join(s["ts"] for s in specs)])
    torch_py = os.path.join(ROOT, "bench", "torch", "models.py")
    flags = {"torch_eager": [], "torch_compile": ["--compile"],
             "torch_max_autotune": ["--compile", "max-autotune"] + AUTOTUNE_SEARCH[a.max_autotune_search]}
    for side in TORCH_SIDES:
        mine = [s for s in specs if side in s["sides"]]
        if not mine:
            continue
        names = list(dict.fromkeys(s["pt"] for s in mine))
        vocabs = list(dict.fromkeys(str(s["vocab"]) for s in mine if "vocab" in s))
        cmds[side] = ([a.python, torch_py] + flags[side] + common +
                      (["--gpt-vocab", ",".join(vocabs)] if vocabs else []) + ["--only", ",".join(names)])
    return cmds


# Note [Warming Inductor's caches]: a cold max-autotune process spends most of its time compiling and
# autotuning (544 s for the GPT-2 and ResNet-50 rows on the H200, against about 95 s warm), in the first
# round only: later processes load Inductor's on-disk caches. --warm-caches-only runs the torch.compile
# and max-autotune processes of the run once, with the same commands, so that this cost can be paid
# beside something else (a build) instead of inside the run's time budget. Nothing it measures is
# kept; the run that follows records each process's cache state ("warm") in its header, as always.
def warm_caches(a, specs):
    cmds = {s: c for s, c in side_commands(a, specs).items() if s in ("torch_compile", "torch_max_autotune")}
    if not cmds:
        print("--warm-caches-only: no torch.compile side selected", file=sys.stderr)
        return 2
    budget = Budget(a.budget_min, a.timeout)
    failed = 0
    for side, cmd in cmds.items():
        limit = budget.limit()
        if limit is None:
            print(f"{side}: not run, the budget ({a.budget_min:g} min) was spent", file=sys.stderr)
            failed += 1
            continue
        cache = inductor_cache_state()
        p = run_process(cmd, f"{side} (cache warm-up, cache {cache})", limit)
        print(f"{side}: {p['status']} in {p['s']:.0f} s, {len(p['rows'])} rows (cache was {cache}; not kept)")
        failed += p["status"] != "ok"
    return 1 if failed else 0


def run_parity(a, config, budget):
    """One loss-curve run: gpt2_loss_parity.py's result dict, or {"error"}; and its process record."""
    batch, seq = PARITY_SHAPES[config]
    fd, out = tempfile.mkstemp(suffix=".json", prefix="gpt2_parity_")
    os.close(fd)
    os.unlink(out)
    limit = budget.limit()
    proc = {"config": config, "status": "not run: the run's time budget was spent", "s": 0.0,
            "timeout_s": None if limit is None else round(limit)}
    if limit is None:
        return {"error": proc["status"]}, proc
    cmd = [a.python, os.path.join(ROOT, "bench", "gpt2_loss_parity.py"), "--build", a.build, "--steps",
           str(a.parity_steps), "--config", config, "--batch", str(batch), "--seq", str(seq), "--json-out", out,
           "--timeout", str(int(limit))]
    cmd += [] if a.parity_text == "markov" else ["--text", a.parity_text]
    p = run_process(cmd, f"loss-curve parity ({config})", limit)
    proc.update(status=p["status"], s=round(p["s"], 1))
    try:
        with open(out) as f:
            r = json.load(f)
        os.unlink(out)
        return {"tessera": r["tessera"], "torch": r["torch"], "torch_model": r.get("torch_model")}, proc
    except (OSError, ValueError, KeyError):
        return {"error": p["status"] if p["status"] != "ok" else "no result written"}, proc


def write_atomically(path, doc):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(path)))
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------------------------------------------
# The table.

def fmt(x, w):
    if not isinstance(x, (int, float)):
        return f"{'-':>{w}s}"
    return f"{x:{w},.0f}" if abs(x) >= 1000 else f"{x:{w}.3f}"


def print_table(doc):
    """One line per row, by key (the file's rows say the work in full): the medians of each side, the
    reference, the ratio with its spread, and the verdict (parity where the spread holds 1.0)."""
    print(f"{'row':<24} {'unit':<12} {'tessera':>10} {'eager':>10} {'compile':>10} {'max-aut.':>10}  "
          f"{'reference':<12} {'ratio':>6} {'spread':>13} {'verdict':<7} meets")
    short = {"torch_eager": "eager", "torch_compile": "compile", "torch_max_autotune": "max-autotune"}
    for r in doc["rows"]:
        spread = (f"{r['ratio_min']:.3f}-{r['ratio_max']:.3f}" if r.get("ratio_min") is not None else "")
        ref = short.get(r.get("reference_side"), "2% rule" if r["unit"] == "max rel diff" else "-")
        print(f"{r['key']:<24} {r['unit']:<12} {fmt(r['tessera'], 10)} {fmt(r['torch_eager'], 10)} "
              f"{fmt(r['torch_compile'], 10)} {fmt(r['torch_max_autotune'], 10)}  {ref:<12} "
              f"{fmt(r['ratio'], 6)} {spread:>13} {r.get('verdict') or '':<7} {r['meets']}"
              + "".join(f"\n    {s} error: {e[:150]}" for s, e in r.get("errors", {}).items()))


# ---------------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=os.environ.get("TESSERA_PYTHON", sys.executable),
                    help="the Python whose torch (built with CUDA) runs the PyTorch side (default: TESSERA_PYTHON, "
                    "else the one running this script)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of the four sides")
    ap.add_argument("--runs", type=int, default=7, help="measurements per row and process")
    ap.add_argument("--iters", type=int, default=3, help="steps per measurement")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--only", default="", help="comma-separated parts of row keys or program row names "
                    "(gpt2, v50304, logits, resnet50, mlp, attention; 'parity': the loss-curve runs); writes "
                    "models-partial.json")
    ap.add_argument("--gpt-batch", type=int, default=16)
    ap.add_argument("--gpt-seq", type=int, default=1024)
    ap.add_argument("--resnet-batch", type=int, default=256)
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile's default mode")
    ap.add_argument("--no-max-autotune", dest="max_autotune", action="store_false",
                    help="skip torch.compile max-autotune")
    ap.add_argument("--max-autotune-search", choices=sorted(AUTOTUNE_SEARCH), default="aten",
                    help="max-autotune's GEMM and convolution choices: cuBLAS and cuDNN (aten), or Inductor's "
                    "Triton templates too (full: cold, 6 minutes for GPT-2 and over 10 for ResNet-50 on the H200)")
    ap.add_argument("--parity", action="store_true", help="add the loss-curve parity runs to a full run")
    ap.add_argument("--parity-steps", type=int, default=200)
    ap.add_argument("--parity-configs", default="small,124m",
                    help="the loss-curve runs: comma-separated configs of bench_models (small, 124m)")
    ap.add_argument("--parity-text", default="python",
                    help="their text: 'python' (the Python standard library's sources), 'markov' (bench_models' "
                    "seeded order-2 Markov text, whose plateau ends in a loss spike that small rounding differences "
                    "move), or a file")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per program run, at most")
    ap.add_argument("--budget-min", type=float, default=15.0,
                    help="minutes for the whole run (0: no limit but --timeout)")
    ap.add_argument("--warm-caches-only", action="store_true",
                    help="run each Inductor side's process once, with the commands of the run these options "
                    "select, to fill Inductor's caches; measures nothing, writes no file and needs no build "
                    "(Note [Warming Inductor's caches])")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "models.json"),
                    help="the full run's file; a partial run (--only) writes models-partial.json beside it")
    a = ap.parse_args()
    bad = [c for c in a.parity_configs.split(",") if c not in PARITY_SHAPES]
    if bad:
        ap.error(f"--parity-configs: unknown {', '.join(bad)} (expected {', '.join(PARITY_SHAPES)})")
    if a.rounds < 1:
        ap.error("--rounds must be at least 1")
    out = os.path.join(os.path.dirname(os.path.abspath(a.out)), "models-partial.json") if a.only else a.out

    st = {"gpt_batch": a.gpt_batch, "gpt_seq": a.gpt_seq, "resnet_batch": a.resnet_batch, "only": a.only,
          "parity": a.parity, "compile": a.compile, "max_autotune": a.max_autotune, "rounds": a.rounds,
          "runs": a.runs, "iters": a.iters, "warmup": a.warmup,
          "max_autotune_search": a.max_autotune_search, "timeout_s": a.timeout,
          "budget_min": a.budget_min, "parity_steps": a.parity_steps, "parity_text": a.parity_text}
    specs = selected_specs(st)  # a side skipped by --no-compile or --no-max-autotune is no part of any row
    parity = parity_selected(st)
    if not specs and not parity:
        ap.error(f"--only {a.only!r} selects no row")
    if a.warm_caches_only:
        return warm_caches(a, specs)
    binary = os.path.join(a.build, "bench", "bench_models")
    if specs and not os.path.exists(binary):
        print(f"{binary} not found: build the cuda preset's bench_models first", file=sys.stderr)
        return 2

    budget = Budget(a.budget_min, a.timeout)
    commit, started = commit_id(ROOT), datetime.datetime.now()
    env = gpu_environment(a.python)
    print(f"==> models on {env['device']} (driver {env['driver']}), torch {env['torch']}, commit {commit}; "
          f"writes {out} at the end", file=sys.stderr, flush=True)
    cmds = side_commands(a, specs)
    clocks_before = gpu_clocks()
    rounds, processes = [], []
    for i in range(a.rounds if specs else 0):
        rd, pr = {}, {}
        for side in SIDES:
            if side not in cmds:
                continue
            limit = budget.limit()
            cache = inductor_cache_state() if side in ("torch_compile", "torch_max_autotune") else None
            if limit is None:
                p = {"header": {}, "rows": {}, "status": "not run: the run's time budget was spent "
                     f"({a.budget_min:g} min; --budget-min raises it)", "s": 0.0}
            else:
                left = sum(EST_S[s] for s in cmds) * (a.rounds - i - 1)
                print(f"==> round {i + 1}/{a.rounds}, {side}, at {budget.elapsed():.0f} s "
                      f"(warm rounds after this one: about {left} s more)", file=sys.stderr, flush=True)
                p = run_process(cmds[side], f"{side} (round {i + 1})", limit)
            rd[side] = {"rows": p["rows"], "status": p["status"]}
            pr[side] = {"status": p["status"], "s": round(p["s"], 1),
                        "timeout_s": None if limit is None else round(limit), "inductor_cache": cache,
                        "header": p["header"]}  # what the program said of itself (device, torch, mode, ...)
        rounds.append(rd)
        processes.append(pr)
    parity_results, parity_procs = {}, []
    if parity:
        for config in a.parity_configs.split(","):
            parity_results[config], proc = run_parity(a, config, budget)
            parity_procs.append(proc)
    clocks_after = gpu_clocks()

    doc = build_document({"settings": st, "rounds": rounds, "parity": parity_results, "env": env,
                          "clocks_before": clocks_before, "clocks_after": clocks_after, "commit": commit,
                          "date": started.date().isoformat(), "wall_s": round(budget.elapsed(), 1),
                          "processes": processes, "parity_processes": parity_procs})
    if doc["incomplete"] and not a.only:
        out = os.path.join(os.path.dirname(os.path.abspath(a.out)), "models-partial.json")
        print(f"{len(doc['incomplete'])} row-round-side(s) without samples (first: {doc['incomplete'][0]}): "
              f"a partial run, written to {out}, never models.json (Note [A whole models run])", file=sys.stderr)
    write_atomically(out, doc)
    print(f"models on {env['device']} (driver {env['driver']}), torch {env['torch']}, commit {commit}, "
          f"{a.rounds} rounds, {doc['wall_s']:.0f} s")
    print_table(doc)
    print(f"written: {out}")
    if specs and not any(r["tessera"] is not None for r in doc["rows"] if r["unit"] != "max rel diff"):
        print("tessera's side produced no rows", file=sys.stderr)
        return 2
    return 0 if all(r["meets"] in (None, True) for r in doc["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
