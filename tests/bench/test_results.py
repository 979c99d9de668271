#!/usr/bin/env python3
"""Checks every committed benchmark result, bench/results/*.json, against the shape its writer in bench/
gives it, and re-derives from the raw samples in the file every figure the writer computes from them
(medians, min-max spreads, ratios, verdicts), so that a file edited by hand, merged from two runs or
written by an older writer fails here rather than in a reader's conclusions. Standard library only.

Per file: the header (suite, commit, date; the device for GPU suites), the rows (named, with a unit
where the writer gives one, every number finite), then the suite's own re-derivation. Where the writer
rounds its samples and its figures, a stored figure must be what the writer's rounding gives for some
unrounded samples that round to the stored ones (exact for a median of an odd count, a min or a max);
elsewhere it must equal the figure re-derived (relative tolerance 1e-6).

usage: test_results.py [RESULTS_DIR]   (default: bench/results of this tree)
Prints one line per file; exit status 1 when any file fails.
"""
import datetime
import fnmatch
import glob
import json
import math
import os
import re
import statistics
import sys

# Written before the one-run format (the whole file from one run, with every raw sample): there is
# nothing in them to re-derive from. Each is to be regenerated whole by its script on the GPU machine
# (cuda-micro.json: bench/run_cuda_micro.py; amp-graphs.json: bench/run_cuda_graph.py and
# bench/run_amp_accuracy.py; models.json: bench/run_models.py), with the raw samples kept; it then
# leaves this list and gets a checker below. Until then only their being JSON objects with rows is
# checked, and a listed file that carries samples fails (it was regenerated: take it off the list).
LEGACY_AWAITING_REGENERATION = {"cuda-micro.json", "amp-graphs.json", "models.json"}

# The keys under which the writers keep raw samples (anywhere in a file).
SAMPLE_KEYS = {"samples", "reference_samples", "samples_ms", "samples_tessera", "samples_torch", "samples_cxx",
               "torch_eager_samples", "torch_compile_samples", "pairs", "tessera_rounds", "libtorch_rounds"}

REL = 1e-6
COMMIT = re.compile(r"[0-9a-f]{7,40}")
CPU_LEVELS = ["baseline", "avx2", "avx512"]  # run_cpu_micro.py's LEVELS, in order


# ---------------------------------------------------------------------------------------------------
# Findings of one file and the comparisons that record them.

def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def show(x):
    return f"{x:.10g}" if isinstance(x, float) else repr(x)


class Findings:
    """The problems found in one file, and how many stored figures were re-derived."""

    def __init__(self):
        self.problems = []
        self.derived = 0
        self.rows = "no rows"  # what the figures were found in, for the report

    def bad(self, message):
        self.problems.append(message)

    def expect(self, where, obj, key, want):
        """obj[key] equals the re-derived `want` (numbers within REL; None, bools and strings exactly)."""
        self.derived += 1
        if key not in obj:
            self.bad(f"{where}: no {key!r} (re-derived {show(want)})")
            return
        got = obj[key]
        if is_number(got) and is_number(want):
            ok = math.isclose(got, want, rel_tol=REL, abs_tol=1e-12)
        else:
            ok = type(got) is type(want) and got == want
        if not ok:
            self.bad(f"{where}: {key} {show(got)}, re-derived {show(want)}")

    def expect_rounded(self, where, obj, key, bounds, digits):
        """obj[key] is round(v, digits) for some v within bounds (the unrounded figure's possible values)."""
        self.derived += 1
        got = obj.get(key)
        lo, hi = round(bounds[0], digits), round(bounds[1], digits)
        tol = REL * max(abs(lo), abs(hi))
        if not is_number(got) or not lo - tol <= got <= hi + tol:
            want = show(lo) if lo == hi else f"in [{show(lo)}, {show(hi)}]"
            self.bad(f"{where}: {key} {show(got)}, re-derived {want}")

    def expect_meets(self, where, obj, ratio_bounds, target):
        """obj["meets"] is ratio >= target for the unrounded ratio (either where its bounds straddle the target)."""
        self.derived += 1
        got = obj.get("meets")
        if (ratio_bounds[0] >= target and got is not True) or (ratio_bounds[1] < target and got is not False):
            self.bad(f"{where}: meets {got!r} with ratio in [{show(ratio_bounds[0])}, {show(ratio_bounds[1])}] "
                     f"against target {target}")

    def absent(self, where, obj, key):
        if key in obj:
            self.bad(f"{where}: has {key!r}, which the writer gives only where it can derive it")

    def samples(self, where, obj, key, allow_empty=False):
        """obj[key] as a list of positive finite numbers (non-empty unless allowed), else None, noted."""
        if key not in obj:
            self.bad(f"{where}: lacks raw samples {key!r}")
            return None
        s = obj[key]
        if not isinstance(s, list) or not (s or allow_empty) or not all(is_number(x) and x > 0 for x in s):
            self.bad(f"{where}: {key!r} is not a {'' if allow_empty else 'non-empty '}list of positive numbers")
            return None
        return s

    def count(self, where, xs, key, n):
        if len(xs) != n:
            self.bad(f"{where}: {len(xs)} {key}, the writer keeps one per round ({n})")


def verdict(lo, hi):
    """The writers' verdict from a spread of ratios: parity where it holds 1.0."""
    return "parity" if lo <= 1.0 <= hi else ("faster" if lo > 1.0 else "slower")


# Figures rounded by the writer: bounds of the unrounded values behind them.

def span(x, digits):
    """The values that rounded to x at `digits` decimals."""
    h = 0.5 * 10.0 ** -digits
    return (x - h, x + h)


def quotient(num, den):
    """Bounds of num / den for positive bounds."""
    return (num[0] / den[1], num[1] / den[0])


def median_of_rounded(samples, digits):
    """Bounds of round(median(raw), digits) from samples = [round(raw, digits)]: the middle sample itself
    for an odd count (rounding keeps the order), half a unit either side of the samples' median else."""
    m = statistics.median(samples)
    return (m, m) if len(samples) % 2 else span(m, digits)


# ---------------------------------------------------------------------------------------------------
# What every file shares.

def check_header(f, doc, suite, gpu):
    if doc.get("suite") != suite or not suite:
        f.bad(f"header: suite {doc.get('suite')!r}, its writer names it {suite!r}")
    commit = doc.get("commit")
    if not isinstance(commit, str) or not COMMIT.fullmatch(commit):
        dirty = " (figures of a dirty tree belong to no commit)" if str(commit).endswith("-dirty") else ""
        f.bad(f"header: commit {commit!r} is not 7 to 40 hex digits{dirty}")
    date = doc.get("date")
    try:
        datetime.datetime.fromisoformat(date[:-1] if date.endswith("Z") else date)
    except (AttributeError, TypeError, ValueError):
        f.bad(f"header: date {date!r} is not ISO 8601")
    if gpu and not (isinstance(doc.get("device"), str) and doc["device"].strip()):
        f.bad(f"header: device {doc.get('device')!r}: a GPU suite names its GPU")


def named_rows(f, doc, unit=True):
    """(label, row) of doc["rows"], a non-empty list of objects each named by "work" or "name" and, where
    the writer gives one, with a unit; the label is the quoted name, for the report."""
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        f.bad("'rows' is not a non-empty list")
        return []
    out = []
    for i, r in enumerate(rows):
        name = r.get("work", r.get("name")) if isinstance(r, dict) else None
        if not isinstance(name, str) or not name:
            f.bad(f"row {i}: not an object named by 'work' or 'name'")
            continue
        if unit and not (isinstance(r.get("unit"), str) and r["unit"]):
            f.bad(f"{name!r}: no unit")
        out.append((repr(name), r))
    f.rows = f"{len(out)} rows"
    return out


def non_finite(obj, path="$"):
    """Paths of the numbers in obj that are not finite (json reads NaN and Infinity)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        yield path
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from non_finite(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from non_finite(v, f"{path}[{i}]")


def sample_keys_in(obj):
    if isinstance(obj, dict):
        return (SAMPLE_KEYS & set(obj)) | set().union(*(sample_keys_in(v) for v in obj.values()))
    if isinstance(obj, list):
        return set().union(*(sample_keys_in(v) for v in obj))
    return set()


# ---------------------------------------------------------------------------------------------------
# One checker per writer.

def check_compile(f, doc):
    """bench/run_compile.py: figures are medians over the rounds of "samples" (graph) and
    "reference_samples" (eager); ratio = eager / graph; PyTorch's figures are medians of its samples."""
    if not is_number(doc.get("rounds")):
        f.bad("header: no 'rounds'")
    rows = named_rows(f, doc)
    torch_run = any("torch_eager_samples" in r for _, r in rows)  # a --torch run
    if doc.get("inductor_cache") not in (("cold", "warm") if torch_run else (None,)):
        f.bad(f"header: inductor_cache {doc.get('inductor_cache')!r} in a run {'with' if torch_run else 'without'} "
              "PyTorch's rows")
    for where, r in rows:
        work = r.get("work", "")
        s, e = f.samples(where, r, "samples"), f.samples(where, r, "reference_samples")
        if s is None or e is None:
            continue
        med, emed = statistics.median(s), statistics.median(e)
        for key, want in (("tessera", med), ("tessera_min", min(s)), ("tessera_max", max(s)),
                          ("reference_value", emed), ("reference_min", min(e)), ("reference_max", max(e)),
                          ("ratio", emed / med)):
            f.expect(where, r, key, want)
        f.expect(where, r, "reference", "the same graph's nodes run one by one (eager)" if work.startswith("launches")
                 else "tessera eager (same program, same process)")
        check_compile_torch(f, where, r, s, med)
        check_compile_throughput(f, where, r, med, emed)
        if work.startswith("call"):
            f.expect(where, r, "target", 1.0)
            f.expect(where, r, "meets", emed / med >= 1.0)
            f.expect(where, r, "verdict", verdict(min(e) / max(s), max(e) / min(s)))
            if r.get("nodes"):
                f.expect(where, r, "overhead_us_per_node", (med - emed) * 1000.0 / r["nodes"])
            else:
                f.absent(where, r, "overhead_us_per_node")
        else:
            f.expect(where, r, "target", None)
            f.expect(where, r, "meets", None)
            f.absent(where, r, "verdict")


def check_compile_torch(f, where, r, s, med):
    """The PyTorch columns of a compile row: present with their samples (a --torch run) or null."""
    if "torch_eager_samples" not in r and "torch_compile_samples" not in r:
        f.expect(where, r, "torch_eager", None)
        f.expect(where, r, "torch_compile", None)
        f.absent(where, r, "ratio_vs_torch")
        return
    te = f.samples(where, r, "torch_eager_samples", allow_empty=True)
    tc = f.samples(where, r, "torch_compile_samples", allow_empty=True)
    if te is None or tc is None:
        return
    eager = statistics.median(te) if te else None
    compiled = statistics.median(tc) if tc else None
    f.expect(where, r, "torch_eager", eager)
    f.expect(where, r, "torch_compile", compiled)
    if not (isinstance(r.get("torch_compile_kind"), str) and r["torch_compile_kind"]):
        f.bad(f"{where}: no torch_compile_kind")
    best = min([v for v in (eager, compiled) if v is not None], default=None)
    if best is None:
        f.absent(where, r, "ratio_vs_torch")
        return
    pool = tc if best == compiled else te  # the faster PyTorch side's samples
    f.expect(where, r, "ratio_vs_torch", best / med)
    f.expect(where, r, "verdict_vs_torch", verdict(min(pool) / max(s), max(pool) / min(s)))


def check_compile_throughput(f, where, r, med, emed):
    """Items per second of a throughput row: items * 1000 / median ms for every column, one item count."""
    if "tessera_throughput" not in r:
        return
    if not (isinstance(r.get("throughput_unit"), str) and r["throughput_unit"].endswith("/s")):
        f.bad(f"{where}: throughput_unit {r.get('throughput_unit')!r}")
    if not is_number(r["tessera_throughput"]):
        f.bad(f"{where}: tessera_throughput {r['tessera_throughput']!r}")
        return
    items = round(r["tessera_throughput"] * med / 1000.0)  # the row's items per call (an image or token count)
    per_s = lambda ms: items * 1000.0 / ms if ms else None  # noqa: E731
    f.expect(where, r, "tessera_throughput", per_s(med))
    f.expect(where, r, "eager_throughput", per_s(emed))
    for k in ("torch_eager", "torch_compile"):
        f.expect(where, r, k + "_throughput", per_s(r.get(k)))


def check_compile_time(f, doc):
    """bench/run_compile.py --compile-time: one first call per row (samples[0]) against one eager call
    (reference_samples[0]); ratio = eager / first call; torch.compile's first call / tessera's."""
    for where, r in named_rows(f, doc):
        s, e = f.samples(where, r, "samples"), f.samples(where, r, "reference_samples")
        if s is None or e is None:
            continue
        first, eager = s[0], e[0]
        f.expect(where, r, "tessera", first)
        f.expect(where, r, "reference_value", eager)
        f.expect(where, r, "ratio", eager / first)
        f.expect(where, r, "target", None)
        f.expect(where, r, "meets", None)
        builds = r.get("builds")
        if builds and not is_number(r.get("codegen_ms")):
            f.bad(f"{where}: builds without codegen_ms")
        else:
            f.expect(where, r, "ms_per_build", r["codegen_ms"] / builds if builds else None)
        if r.get("torch_compile") is not None:
            f.expect(where, r, "ratio_vs_torch", r["torch_compile"] / first)
            f.expect(where, r, "torch_compile_mode", "default")
        else:
            f.absent(where, r, "ratio_vs_torch")
        if not r.get("work", "").endswith((" cold cache", " warm cache")):
            f.bad(f"{where}: names no cache state (cold or warm)")


def check_cpu_micro(f, doc):
    """bench/run_cpu_micro.py: samples in ms rounded to 4 decimals, medians and min-max likewise, ratios
    (PyTorch / tessera) of the unrounded figures rounded to 3; and the per-level figures."""
    rounds = doc.get("rounds")
    if not is_number(rounds):
        f.bad("header: no 'rounds'")
    rows = named_rows(f, doc)
    for where, r in rows:
        sm = r.get("samples_ms")
        if not isinstance(sm, dict):
            f.bad(f"{where}: lacks raw samples 'samples_ms' (an object of tessera's and torch's)")
            continue
        ts, pt = f.samples(where, sm, "tessera"), f.samples(where, sm, "torch")
        if ts is None or pt is None:
            continue
        f.count(where, pt, "torch samples", rounds)
        if is_number(rounds) and len(ts) > rounds:  # a round's tessera run may lack the benchmark
            f.bad(f"{where}: {len(ts)} tessera samples in {rounds} rounds")
        for key, xs in (("tessera", ts), ("reference_value", pt), ("torch_eager", pt)):
            f.expect_rounded(where, r, key, median_of_rounded(xs, 4), 4)
        for key, want in (("tessera_min", min(ts)), ("tessera_max", max(ts)), ("torch_min", min(pt)),
                          ("torch_max", max(pt))):
            f.expect(where, r, key, want)
        ratio = quotient(span(statistics.median(pt), 4), span(statistics.median(ts), 4))
        f.expect_rounded(where, r, "ratio", ratio, 3)
        f.expect_rounded(where, r, "ratio_min", quotient(span(min(pt), 4), span(max(ts), 4)), 3)
        f.expect_rounded(where, r, "ratio_max", quotient(span(max(pt), 4), span(min(ts), 4)), 3)
        if is_number(r.get("target")):
            f.expect_meets(where, r, ratio, r["target"])
        else:
            f.bad(f"{where}: no target")
        f.expect(where, r, "reference", f"torch {doc.get('torch')} eager, {doc.get('threads')} threads")
    check_cpu_levels(f, doc, {r.get("work") for _, r in rows})


def check_cpu_levels(f, doc, works):
    """levels: every instruction-set level up to the supported one (or none), each with every row's work,
    each a summary of its samples (ms, 4 decimals)."""
    levels = doc.get("levels")
    if not isinstance(levels, dict):
        f.bad("no 'levels' object")
        return
    supported = doc.get("cpu_level_supported")
    want = CPU_LEVELS[:CPU_LEVELS.index(supported) + 1] if supported in CPU_LEVELS else None
    if levels and list(levels) != want:
        f.bad(f"levels {list(levels)}, the supported level {supported!r} gives {want}")
    for lv, per_work in levels.items():
        if not isinstance(per_work, dict) or set(per_work) != works:
            f.bad(f"level {lv}: not one summary per row's work")
            continue
        for work, summary in per_work.items():
            where = f"level {lv} {work!r}"
            s = f.samples(where, summary, "samples_ms")
            if s is None:
                continue
            f.expect_rounded(where, summary, "median", median_of_rounded(s, 4), 4)
            f.expect(where, summary, "min", min(s))
            f.expect(where, summary, "max", max(s))


def check_onednn_choice(f, doc):
    """bench/run_onednn_choice.py: per mode (native, onednn, rule) samples in ms rounded to 4 decimals and
    their median likewise; speedups (native / oneDNN) of the unrounded figures rounded to 3."""
    rounds = doc.get("rounds")
    if not is_number(rounds):
        f.bad("header: no 'rounds'")
    rows = named_rows(f, doc)
    works = [r.get("work", "") for _, r in rows]
    if works != sorted(works):
        f.bad("rows are not in the writer's order (sorted by benchmark name)")
    for where, r in rows:
        sm = r.get("samples")
        if not isinstance(sm, dict):
            f.bad(f"{where}: lacks raw samples 'samples' (an object of the modes')")
            continue
        per = {m: f.samples(where, sm, m) for m in ("native", "onednn", "rule")}
        if None in per.values():
            continue
        for m, s in per.items():
            f.count(where, s, f"{m} samples", rounds)
            f.expect_rounded(where, r, m, median_of_rounded(s, 4), 4)
        n, o = per["native"], per["onednn"]
        medians = quotient(span(statistics.median(n), 4), span(statistics.median(o), 4))
        f.expect_rounded(where, r, "speedup", medians, 3)
        f.expect_rounded(where, r, "speedup_min", quotient(span(min(n), 4), span(max(o), 4)), 3)
        f.expect_rounded(where, r, "speedup_max", quotient(span(max(n), 4), span(min(o), 4)), 3)
        f.expect_rounded(where, r, "speedup_best", quotient(span(min(n), 4), span(min(o), 4)), 3)


def check_python_overhead(f, doc):
    """bench/python/overhead.py: medians and min-max of the rounds' samples, unrounded; ratio = PyTorch /
    tessera, target 1.0."""
    for where, r in named_rows(f, doc):
        t, o = f.samples(where, r, "samples_tessera"), f.samples(where, r, "samples_torch")
        if t is None or o is None:
            continue
        f.count(where, t, "tessera samples", doc.get("rounds"))
        f.count(where, o, "torch samples", doc.get("rounds"))
        tm, om = statistics.median(t), statistics.median(o)
        for key, want in (("tessera", tm), ("tessera_min", min(t)), ("tessera_max", max(t)), ("reference_value", om),
                          ("torch_eager", om), ("torch_min", min(o)), ("torch_max", max(o)), ("ratio", om / tm),
                          ("target", 1.0), ("meets", om / tm >= 1.0)):
            f.expect(where, r, key, want)


def check_python_train_step(f, doc):
    """bench/python/train_step.py: medians and min-max of tessera from Python, tessera from C++ (the
    reference) and PyTorch, unrounded; ratio = C++ / Python."""
    for where, r in named_rows(f, doc):
        py, cxx, to = (f.samples(where, r, k) for k in ("samples_tessera", "samples_cxx", "samples_torch"))
        if None in (py, cxx, to):
            continue
        for key, s in (("tessera samples", py), ("C++ samples", cxx), ("torch samples", to)):
            f.count(where, s, key, doc.get("rounds"))
        t, c, o = statistics.median(py), statistics.median(cxx), statistics.median(to)
        for key, want in (("tessera", t), ("tessera_min", min(py)), ("tessera_max", max(py)), ("reference_value", c),
                          ("reference_min", min(cxx)), ("reference_max", max(cxx)), ("ratio", c / t),
                          ("torch_eager", o), ("torch_min", min(to)), ("torch_max", max(to)), ("target", None),
                          ("meets", None)):
            f.expect(where, r, key, want)


def check_ddp(f, doc):
    """bench/run_ddp.py: no rows but one object per side ("tessera", "torch_eager", null where the side did
    not run; tessera's must have run), each with every (plain_ms, ddp_ms) pair; overhead of a pair =
    100 * (ddp / plain - 1); medians and spread over the pairs; the verdict from tessera's spread."""
    if not (isinstance(doc.get("work"), str) and doc["work"]):
        f.bad("no 'work'")
    for key in ("rounds", "pairs_per_process", "iters", "target_abs_overhead_pct"):
        if not is_number(doc.get(key)):
            f.bad(f"header: no {key!r}")
    if not isinstance(doc.get("tessera"), dict):
        f.bad("'tessera' is not an object: tessera's side did not run")
    sides = [side for side in ("tessera", "torch_eager") if isinstance(doc.get(side), dict)]
    f.rows = f"sides {', '.join(sides) or 'none'}"
    for side in ("tessera", "torch_eager"):
        if side in sides:
            check_ddp_side(f, doc, side)
        elif doc.get(side) is not None:
            f.bad(f"{side!r} is neither an object nor null")
    ts = doc.get("tessera")
    if isinstance(ts, dict) and all(is_number(ts.get(k)) for k in ("overhead_pct_median", "overhead_pct_min",
                                                                      "overhead_pct_max")):
        lo, hi, med = ts["overhead_pct_min"], ts["overhead_pct_max"], ts["overhead_pct_median"]
        f.expect("file", doc, "verdict", "no measurable overhead (the spread holds 0)" if lo <= 0.0 <= hi else
                 f"overhead {med:.2f}% (spread {lo:.2f} to {hi:.2f}%)")


def check_ddp_side(f, doc, side):
    r = doc[side]
    pairs = r.get("pairs")
    if not isinstance(pairs, list) or not pairs:
        f.bad(f"{side}: lacks raw samples 'pairs'")
        return
    if not all(isinstance(p, dict) and is_number(p.get("plain_ms")) and p["plain_ms"] > 0 and
               is_number(p.get("ddp_ms")) and p["ddp_ms"] > 0 for p in pairs):
        f.bad(f"{side}: a pair without positive plain_ms and ddp_ms")
        return
    if is_number(doc.get("rounds")) and is_number(doc.get("pairs_per_process")) and \
            len(pairs) > doc["rounds"] * doc["pairs_per_process"]:
        f.bad(f"{side}: {len(pairs)} pairs from {doc['rounds']} processes of {doc['pairs_per_process']}")
    over = [100.0 * (p["ddp_ms"] / p["plain_ms"] - 1.0) for p in pairs]
    for key, want in (("plain_ms_median", statistics.median(p["plain_ms"] for p in pairs)),
                      ("ddp_ms_median", statistics.median(p["ddp_ms"] for p in pairs)),
                      ("overhead_pct_median", statistics.median(over)), ("overhead_pct_min", min(over)),
                      ("overhead_pct_max", max(over))):
        f.expect(side, r, key, want)
    if not isinstance(r.get("summaries"), list):
        f.bad(f"{side}: no 'summaries' list")


LIBTORCH_HIGHER_IS_BETTER = {"us/op": False, "steps/s": True, "tokens/s": True}


def check_libtorch(f, doc):
    """bench/run_libtorch.py: per row one value per round and side ("tessera_rounds", "libtorch_rounds",
    from each round's program output kept in "samples"); medians; ratio = median of the per-round ratios
    (oriented by the unit: higher is better for tessera), spread their min-max, verdict from it."""
    rounds = doc.get("rounds")
    if not is_number(rounds):
        f.bad("header: no 'rounds'")
    for where, r in named_rows(f, doc):
        ts, lt = r.get("tessera_rounds"), r.get("libtorch_rounds")
        if not isinstance(ts, list) or not isinstance(lt, list) or not ts or not lt:
            f.bad(f"{where}: lacks raw samples 'tessera_rounds' and 'libtorch_rounds'")
            continue
        f.count(where, ts, "tessera rounds", rounds)
        f.count(where, lt, "libtorch rounds", rounds)
        check_libtorch_outputs(f, where, r, ts, lt)
        higher = LIBTORCH_HIGHER_IS_BETTER.get(r.get("unit"))
        if higher is None:
            f.bad(f"{where}: unit {r.get('unit')!r} says no ratio orientation")
            continue
        complete = all(is_number(x) and x > 0 for x in ts + lt)
        per_round = [(t / l if higher else l / t) for t, l in zip(ts, lt)] if complete else []
        for key, want in (("tessera", statistics.median(ts) if complete else None),
                          ("libtorch", statistics.median(lt) if complete else None),
                          ("ratio", statistics.median(per_round) if per_round else None),
                          ("ratio_min", min(per_round) if per_round else None),
                          ("ratio_max", max(per_round) if per_round else None),
                          ("verdict", verdict(min(per_round), max(per_round)) if per_round else None)):
            f.expect(where, r, key, want)


def check_libtorch_outputs(f, where, r, ts, lt):
    """samples: each round's output line of each side (or null); its value is the round's figure, its
    error is in "errors" (the last round's per side)."""
    outs = r.get("samples")
    if not isinstance(outs, list) or len(outs) != len(ts) or not all(isinstance(o, dict) for o in outs):
        f.bad(f"{where}: 'samples' is not one object per round")
        return
    errors = {}
    for i, o in enumerate(outs):
        for side, figures in (("tessera", ts), ("libtorch", lt)):
            out = o.get(side)
            if out is not None and not isinstance(out, dict):
                f.bad(f"{where}: round {i} {side} output is not an object")
                continue
            f.derived += 1
            value = (out or {}).get("value")
            if figures[i] != value:
                f.bad(f"{where}: {side}_rounds[{i}] {show(figures[i])}, its output's value {show(value)}")
            if out and out.get("unit") is not None and out["unit"] != r.get("unit"):
                f.bad(f"{where}: round {i} {side} output in {out['unit']!r}, the row in {r.get('unit')!r}")
            if out and out.get("error"):
                errors[side] = out["error"]
    f.expect(where, r, "errors", errors)


# file-name pattern (first match wins), the suite its writer names, its checker
CHECKERS = [
    ("compile-time-*.json", None, check_compile_time),
    ("compile-*.json", None, check_compile),
    ("cpu-micro.json", None, check_cpu_micro),
    ("onednn-choice.json", None, check_onednn_choice),
    ("python-overhead-*.json", None, check_python_overhead),
    ("python-train-step-*.json", None, check_python_train_step),
    ("ddp-cuda.json", "ddp", check_ddp),
    ("libtorch-cuda.json", "libtorch", check_libtorch),
]  # suite None: the file's name without ".json"


def is_gpu_suite(file):
    return "cuda" in file or file in ("models.json", "amp-graphs.json")


def check_legacy(f, doc):
    named_rows(f, doc, unit=False)
    found = sample_keys_in(doc)
    if found:
        f.bad(f"carries raw samples ({', '.join(sorted(found))}): regenerated in the one-run format, so it "
              "leaves LEGACY_AWAITING_REGENERATION and gets a checker")


def check_file(path):
    """(ok, line) for one results file."""
    file = os.path.basename(path)
    f = Findings()
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as e:
        return False, f"FAIL  {file}: not JSON ({e})"
    if not isinstance(doc, dict):
        return False, f"FAIL  {file}: not a JSON object"
    for p in non_finite(doc):
        f.bad(f"{p} is not finite")
    if file in LEGACY_AWAITING_REGENERATION:
        check_legacy(f, doc)
        what = f"legacy, awaiting regeneration: {len(doc.get('rows') or [])} rows, nothing to re-derive"
    else:
        match = [(suite, fn) for pattern, suite, fn in CHECKERS if fnmatch.fnmatch(file, pattern)]
        if not match:
            return False, f"FAIL  {file}: no checker for this suite (add one for its writer in tests/bench/)"
        suite, fn = match[0]
        check_header(f, doc, suite or file[:-len(".json")], is_gpu_suite(file))
        try:
            fn(f, doc)
        except (AttributeError, KeyError, TypeError, ValueError, ZeroDivisionError, statistics.StatisticsError) as e:
            f.bad(f"malformed ({type(e).__name__}: {e})")
        what = f"{f.rows}, {f.derived} figures re-derived"
    if f.problems:
        return False, f"FAIL  {file}: " + "; ".join(f.problems)
    return True, f"ok    {file}: {what}"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    results = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..", "bench", "results")
    paths = sorted(glob.glob(os.path.join(results, "*.json")))
    if not paths:
        print(f"FAIL  no results files in {results}")
        return 1
    ok = True
    for path in paths:
        good, line = check_file(path)
        ok = ok and good
        print(line)
    names = {os.path.basename(p) for p in paths}
    for stale in sorted(LEGACY_AWAITING_REGENERATION - names):
        ok = False
        print(f"FAIL  {stale}: listed in LEGACY_AWAITING_REGENERATION but not in {results}: take it off the list")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
