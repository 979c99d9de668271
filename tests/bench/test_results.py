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
# (cuda-micro.json: bench/run_cuda_micro.py; amp-graphs.json: bench/run_amp_graphs.py; models.json:
# bench/run_models.py), with the raw samples kept; it then
# leaves this list and gets a checker below. Until then only their being JSON objects with rows is
# checked, and a listed file that carries samples fails (it was regenerated: take it off the list).
LEGACY_AWAITING_REGENERATION = set()

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


def leaves(obj, path="$"):
    """(path, value) of every value in obj that is neither a dict nor a list."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, f"{path}.{k}")
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{path}[{i}]")
    else:
        yield path, obj


def non_finite(obj):
    """Paths of the numbers in obj that are not finite (json reads NaN and Infinity)."""
    return [p for p, v in leaves(obj) if isinstance(v, float) and not math.isfinite(v)]


ABSOLUTE_PATH = re.compile(r"(?:^|[\s:=(])(?:/[A-Za-z0-9_.+-]+){2,}")


def machine_paths(obj):
    """Paths of the strings in obj that name an absolute folder or file: a results file identifies its
    programs and data by the repository's names and by content, never by the folders of the machine
    that ran it."""
    return [p for p, v in leaves(obj) if isinstance(v, str) and ABSOLUTE_PATH.search(v)]


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
        if work.startswith(("call", "peak")):  # peak: MiB, eager's over compiled's (lower is better)
            f.expect(where, r, "target", 1.0)
            f.expect(where, r, "meets", emed / med >= 1.0)
            f.expect(where, r, "verdict", verdict(min(e) / max(s), max(e) / min(s)))
            if r.get("nodes") and work.startswith("call"):
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
    """bench/python/overhead.py: per round, `reps` runs of each side; a round's figure is the median of its
    runs, a side's the median of the rounds with their min-max, unrounded; ratio = PyTorch / tessera, its
    spread from the extreme round figures, the verdict from the spread; the target (1.0) is met only when
    faster beyond the spread. A file of the writer before `reps` holds one run per side and round (flat
    lists) and no spread or verdict; its target was met by the medians."""
    reps = doc.get("reps")
    if reps is not None and (not isinstance(reps, int) or reps < 1):
        f.bad(f"'reps' is {reps!r}, not a positive count of runs per round")
        return
    for where, r in named_rows(f, doc):
        rounds = {}
        for key in ("samples_tessera", "samples_torch"):
            xs = r.get(key)
            if reps is None:
                per = f.samples(where, r, key)
                if per is None:
                    break
                rounds[key] = per
            else:
                if not isinstance(xs, list) or not all(isinstance(x, list) for x in xs):
                    f.bad(f"{where}: {key!r} is not a list of rounds, each a list of runs")
                    break
                per = [f.samples(f"{where} {key} round {i + 1}", {"runs": x}, "runs") for i, x in enumerate(xs)]
                if any(p is None for p in per):
                    break
                for i, p in enumerate(per):
                    f.count(f"{where} round {i + 1}", p, f"{key} runs", reps)
                rounds[key] = [statistics.median(p) for p in per]
            f.count(where, rounds[key], key, doc.get("rounds"))
        if len(rounds) < 2:
            continue
        t, o = rounds["samples_tessera"], rounds["samples_torch"]
        tm, om = statistics.median(t), statistics.median(o)
        want = {"tessera": tm, "tessera_min": min(t), "tessera_max": max(t), "reference_value": om,
                "torch_eager": om, "torch_min": min(o), "torch_max": max(o), "ratio": om / tm, "target": 1.0,
                "meets": om / tm >= 1.0}
        if reps is not None:
            lo, hi = min(o) / max(t), max(o) / min(t)
            want.update(ratio_min=lo, ratio_max=hi, verdict=verdict(lo, hi), meets=verdict(lo, hi) == "faster")
        for key, value in want.items():
            f.expect(where, r, key, value)


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


# The GPU suites written whole from one run of alternating rounds (bench/run_cuda_micro.py,
# bench/run_amp_graphs.py): each row keeps every round's output of every side ("samples"), from which
# the per-round figures ("<side>_rounds"), their medians and spreads, the per-round ratios against the
# reference and the verdicts are re-derived here, and each output's figure from its per-call times.

ONE_RUN_ENV = ("device", "driver", "cuda", "torch", "torch_cuda", "cudnn", "nccl", "clocks_before", "clocks_after")
ONE_RUN_CLOCKS = {"sm_mhz", "mem_mhz", "max_sm_mhz", "max_mem_mhz", "temperature_c", "power_w"}
ONE_RUN_SIDES = ("tessera", "torch_eager", "torch_compile", "torch_graph")
ONE_RUN_TORCH = {"torch_eager": "torch eager", "torch_compile": "torch.compile",
                 "torch_graph": "torch.cuda.graph replay"}
ONE_RUN_HIGHER = {"GB/s": True, "TFLOP/s": True, "steps/s": True, "ms": False, "ms/step": False, "us/op": False}
# unit -> (the work field of an output, its figure from the work and the median ms of one call)
ONE_RUN_FIGURE = {"GB/s": ("bytes", lambda n, ms: n / (ms * 1e-3) / 1e9),
                  "TFLOP/s": ("flops", lambda n, ms: n / (ms * 1e-3) / 1e12),
                  "us/op": ("ops", lambda n, ms: ms * 1e3 / n),
                  "steps/s": (None, lambda n, ms: 1000.0 / ms), "ms": (None, lambda n, ms: ms),
                  "ms/step": (None, lambda n, ms: ms)}
ONE_RUN_BUDGET = re.compile(r"([0-9.]+) us budget")


def check_one_run_header(f, doc, partial_file):
    """The GPU environment, the clocks around the timed runs, the rounds, and a partial run in its own file
    (partial_file: the file is <suite>-partial.json)."""
    for key in ONE_RUN_ENV:
        if key not in doc:
            f.bad(f"header: no {key!r} (bench_io.gpu_environment and gpu_clocks)")
    for key in ("clocks_before", "clocks_after"):
        c = doc.get(key)
        if c is not None and not (isinstance(c, dict) and set(c) == ONE_RUN_CLOCKS and
                                  all(v is None or is_number(v) for v in c.values())):
            f.bad(f"header: {key} is neither null nor bench_io.gpu_clocks()'s fields")
    rounds = doc.get("rounds")
    if not (isinstance(rounds, int) and not isinstance(rounds, bool) and rounds >= 1):
        f.bad(f"header: rounds {rounds!r}")
        return None
    partial = doc.get("partial")
    if not isinstance(partial, bool):
        f.bad(f"header: partial {partial!r} is not a bool")
    elif partial != partial_file:
        f.bad(f"header: partial {partial} in {'a' if partial_file else 'no'} -partial.json file (a partial run "
              "writes <suite>-partial.json, a whole run <suite>.json)")
    elif not partial and rounds < 3:
        f.bad(f"header: a whole run of {rounds} rounds (at least 3 alternating rounds per side)")
    return rounds


def one_run_value(out):
    v = out.get("value") if isinstance(out, dict) else None
    return v if is_number(v) and v > 0 else None


def check_one_run_output(f, where, out, unit, runs):
    """One side's output of one round: its figure from the median of its per-call times and its work; a
    sum of conv layers ("layers") is checked against them by the caller."""
    if not isinstance(out, dict):
        f.bad(f"{where}: the output is not an object")
        return
    if out.get("unit") is not None and out["unit"] != unit:
        f.bad(f"{where}: output in {out['unit']!r}, the row in {unit!r}")
    if one_run_value(out) is None:
        if out.get("value") is not None:
            f.bad(f"{where}: value {show(out['value'])} is not a positive number")
        elif not (isinstance(out.get("error"), str) and out["error"]):
            f.bad(f"{where}: no value and no error")
        return
    if "layers" in out:
        return
    s = f.samples(where, out, "samples_ms")
    if s is None:
        return
    if is_number(runs) and len(s) != runs:
        f.bad(f"{where}: {len(s)} per-call samples, the run times {runs} calls")
    ms = statistics.median(s)
    f.expect(where, out, "ms", ms)
    key, figure = ONE_RUN_FIGURE[unit]
    if key is not None and not (is_number(out.get(key)) and out[key] > 0):
        f.bad(f"{where}: no {key!r}, the work of one call")
        return
    f.expect(where, out, "value", figure(out.get(key), ms))


def one_run_ratios(tessera, reference, higher):
    return [(t / r if higher else r / t) for t, r in zip(tessera, reference) if t is not None and r is not None]


def expect_one_run_ratio(f, where, r, prefix, tessera, reference, higher):
    ratios = one_run_ratios(tessera, reference, higher)
    f.expect(where, r, prefix, statistics.median(ratios) if ratios else None)
    f.expect(where, r, prefix + "_min", min(ratios) if ratios else None)
    f.expect(where, r, prefix + "_max", max(ratios) if ratios else None)
    f.expect(where, r, "verdict" + prefix[len("ratio"):], verdict(min(ratios), max(ratios)) if ratios else None)
    return ratios


def spread_of(xs):
    xs = [x for x in xs if x is not None]
    return (statistics.median(xs), min(xs), max(xs)) if xs else (None, None, None)


def check_one_run_row(f, where, r, rounds, runs, rows_by_name):
    """A timing row: per side its rounds from its outputs and its figures from its rounds; the reference
    (the faster PyTorch side by median, the device copy's row or a budget) and the ratios against it.
    Returns {side: per-round figures}, or None where the row cannot be read."""
    unit = r.get("unit")
    higher = ONE_RUN_HIGHER.get(unit)
    if higher is None:
        f.bad(f"{where}: unit {unit!r} says no ratio orientation")
        return None
    sides = [s for s in ONE_RUN_SIDES if s + "_rounds" in r]
    torch_sides = [s for s in sides if s != "tessera"]
    if "tessera" not in sides or not torch_sides:
        f.bad(f"{where}: lacks raw samples (tessera_rounds and a PyTorch side's rounds)")
        return None
    outs = r.get("samples")
    if not (isinstance(outs, list) and len(outs) == rounds and
            all(isinstance(o, dict) and set(o) == set(sides) for o in outs)):
        f.bad(f"{where}: 'samples' is not one object per round ({rounds}) with an output per side ({', '.join(sides)})")
        return None
    per_side, errors = {}, {}
    for side in sides:
        stored = r[side + "_rounds"]
        if not isinstance(stored, list):
            f.bad(f"{where}: {side}_rounds is not a list")
            return None
        f.count(where, stored, f"{side} rounds", rounds)
        vals = [one_run_value(o[side]) for o in outs]
        for i, o in enumerate(outs):
            check_one_run_output(f, f"{where} round {i} {side}", o[side], unit, runs)
            if isinstance(o[side], dict) and o[side].get("error"):
                errors[side] = o[side]["error"]
        f.derived += 1
        if stored != vals:
            f.bad(f"{where}: {side}_rounds {stored}, its outputs' values {vals}")
        med, lo, hi = spread_of(vals)
        for key, want in ((side, med), (side + "_min", lo), (side + "_max", hi)):
            f.expect(where, r, key, want)
        per_side[side] = vals
    f.expect(where, r, "errors", errors)
    for i, o in enumerate(outs):  # the same work on every side
        for key in ("bytes", "flops", "ops"):
            amounts = [o[s][key] for s in sides if isinstance(o[s], dict) and is_number(o[s].get(key))]
            if amounts and not all(math.isclose(a, amounts[0], rel_tol=REL) for a in amounts):
                f.bad(f"{where} round {i}: {key} differ between the sides ({amounts})")
    if "torch_compile" not in sides and "torch_compile" in r:  # a row without the torch.compile column
        f.expect(where, r, "torch_compile", None)
        f.absent(where, r, "torch_compile_min")
    medians = {s: r.get(s) if is_number(r.get(s)) else None for s in torch_sides}
    best = torch_sides[0]
    for s in torch_sides:
        if medians[s] is not None and (medians[best] is None or
                                       (medians[s] > medians[best] if higher else medians[s] < medians[best])):
            best = s
    ref = r.get("reference")
    budget = ONE_RUN_BUDGET.fullmatch(ref) if isinstance(ref, str) else None
    if ref in ONE_RUN_TORCH.values():
        f.expect(where, r, "reference", ONE_RUN_TORCH[best])
        ref_rounds = per_side[best]
        for key in ("torch_reference", "ratio_vs_torch"):
            f.absent(where, r, key)
    else:
        if ref == "device copy":
            copy = rows_by_name.get(r.get("reference_row"))
            if not (isinstance(copy, dict) and isinstance(copy.get("tessera_rounds"), list)):
                f.bad(f"{where}: reference_row {r.get('reference_row')!r} is no row of this file")
                return per_side
            ref_rounds = [x if is_number(x) and x > 0 else None for x in copy["tessera_rounds"]]
        elif budget:
            ref_rounds = [float(budget.group(1))] * rounds
        else:
            f.bad(f"{where}: reference {ref!r} is none of the writers' references")
            return per_side
        f.expect(where, r, "torch_reference", ONE_RUN_TORCH[best])
        expect_one_run_ratio(f, where, r, "ratio_vs_torch", per_side["tessera"], per_side[best], higher)
    for key, want in zip(("reference_value", "reference_min", "reference_max"), spread_of(ref_rounds)):
        f.expect(where, r, key, want)
    ratios = expect_one_run_ratio(f, where, r, "ratio", per_side["tessera"], ref_rounds, higher)
    target = r.get("target")
    if target is not None and not is_number(target):
        f.bad(f"{where}: target {target!r}")
    else:
        f.expect(where, r, "meets", None if target is None else bool(ratios) and statistics.median(ratios) >= target)
    if "peak_mem_gib" in r:
        f.expect(where, r, "peak_mem_gib", spread_of([o["tessera"].get("peak_mem_gib") if isinstance(o["tessera"], dict)
                                                      and is_number(o["tessera"].get("peak_mem_gib")) else None
                                                      for o in outs])[0])
    return per_side


def check_cuda_micro(f, doc, partial_file=False):
    """bench/run_cuda_micro.py: the one-run rows, the ResNet-50 conv layers, and the conv total as the
    per-round sum of its layers' figures."""
    rounds = check_one_run_header(f, doc, partial_file)
    if rounds is None:
        return
    if not isinstance(doc.get("compile"), bool) or (doc["compile"] is False and doc.get("partial") is False):
        f.bad(f"header: compile {doc.get('compile')!r} (a run without torch.compile is partial)")
    runs = doc.get("runs_per_round")
    if not (is_number(runs) and runs >= 20):
        f.bad(f"header: runs_per_round {runs!r} (at least 20 timed calls)")
    rows = named_rows(f, doc)
    by_name = {r.get("name"): r for _, r in rows}
    layers = doc.get("conv_layers")
    if not isinstance(layers, list) or not all(isinstance(c, dict) and isinstance(c.get("layer"), str) for c in layers):
        f.bad("'conv_layers' is not a list of rows named by 'layer'")
        layers = []
    layer_rounds = []
    for c in layers:
        got = check_one_run_row(f, f"conv layer {c['layer']!r}", c, rounds, runs, by_name)
        if got:
            layer_rounds.append(got)
    for where, r in rows:
        check_one_run_row(f, where, r, rounds, runs, by_name)
        for i, o in enumerate(r.get("samples") if isinstance(r.get("samples"), list) else []):
            for side, out in (o.items() if isinstance(o, dict) else ()):
                if isinstance(out, dict) and "layers" in out and one_run_value(out) is not None:
                    parts = [lr.get(side, [None] * rounds)[i] for lr in layer_rounds]
                    f.derived += 1
                    if out["layers"] != len(layers) or None in parts or \
                            not math.isclose(out["value"], sum(parts), rel_tol=REL):
                        f.bad(f"{where} round {i} {side}: {show(out['value'])} ms is not the sum of its "
                              f"{out['layers']} conv layers' figures ({len(layers)} in the file)")
    f.rows = f"{len(rows)} rows, {len(layers)} conv layers"


def check_amp_accuracy(f, where, r):
    """The bf16-autocast accuracy row: each mode's per-epoch test accuracies from its log's lines; the
    final ones, their difference (pp, 4 decimals) and meets against the target's bound."""
    modes = r.get("samples")
    if not (isinstance(modes, dict) and set(modes) == {"float32", "bf16"} and
            all(isinstance(m, dict) for m in modes.values())):
        f.bad(f"{where}: 'samples' is not the float32 and bf16 runs' objects")
        return
    if not (isinstance(r.get("epochs"), int) and r["epochs"] > 0):
        f.bad(f"{where}: epochs {r.get('epochs')!r}")
        return
    final, errors = {}, {}
    for mode, m in modes.items():
        lines, accs = m.get("accuracy_lines"), m.get("epoch_accuracies")
        if not isinstance(lines, list) or not isinstance(accs, list) or not all(isinstance(x, str) for x in lines):
            f.bad(f"{where}: {mode} lacks raw samples 'accuracy_lines' and 'epoch_accuracies'")
            return
        f.derived += 1
        parsed = [float(x) for line in lines for x in re.findall(r"test accuracy ([0-9.]+)%", line)]
        if parsed != accs:
            f.bad(f"{where}: {mode} epoch_accuracies {accs}, its lines give {parsed}")
        if len(accs) > r["epochs"]:
            f.bad(f"{where}: {mode} has {len(accs)} epochs of {r['epochs']}")
        final[mode] = accs[-1] if len(accs) == r["epochs"] else None
        if m.get("error"):
            errors[mode] = m["error"]
        elif final[mode] is None:
            f.bad(f"{where}: {mode} has no final accuracy and no error")
    f.expect(where, r, "tessera", final["bf16"])
    f.expect(where, r, "reference", "tessera float32")
    f.expect(where, r, "reference_value", final["float32"])
    for key in ("torch_eager", "torch_compile", "peak_mem_gib"):  # no PyTorch side, no memory figure
        f.expect(where, r, key, None)
    f.expect(where, r, "errors", errors)
    diff = round(final["bf16"] - final["float32"], 4) if None not in final.values() else None
    f.expect(where, r, "difference_pp", diff)
    bound = re.fullmatch(r"\|difference\| <= ([0-9.]+) pp", str(r.get("target")))
    if not bound:
        f.bad(f"{where}: target {r.get('target')!r}")
    else:
        f.expect(where, r, "meets", diff is not None and abs(diff) <= float(bound.group(1)))
    f.expect(where, r, "ratio", None)


def check_amp_graphs(f, doc, partial_file=False):
    """bench/run_amp_graphs.py: the CUDA graph rows (one-run rows; a graph row's replay speedups over its
    eager row, per round) and, in a whole run, the bf16-autocast accuracy row."""
    rounds = check_one_run_header(f, doc, partial_file)
    if rounds is None:
        return
    runs = doc.get("runs")
    if not (is_number(runs) and runs >= 1):
        f.bad(f"header: runs {runs!r}")
    rows = named_rows(f, doc)
    by_name = {r.get("name"): r for _, r in rows}
    accuracy = [(where, r) for where, r in rows if r.get("unit") == "%"]
    if not accuracy and doc.get("partial") is False:
        f.bad("a whole run without the accuracy row (--skip-accuracy is partial)")
    for where, r in accuracy:
        check_amp_accuracy(f, where, r)
    for where, r in rows:
        if r.get("unit") == "%":
            continue
        per_side = check_one_run_row(f, where, r, rounds, runs, by_name)
        if per_side is None or "eager_row" not in r:
            continue
        eager = by_name.get(r["eager_row"])
        higher = ONE_RUN_HIGHER[r["unit"]]
        if not isinstance(eager, dict) or eager.get("unit") != r["unit"]:
            f.bad(f"{where}: eager_row {r['eager_row']!r} is no row of this file in {r['unit']}")
            continue
        for key, graph, eager_side in (("replay_speedup", "tessera", "tessera"),
                                       ("torch_replay_speedup", "torch_graph", "torch_eager")):
            eager_rounds = [x if is_number(x) and x > 0 else None for x in eager.get(eager_side + "_rounds") or []]
            ratios = one_run_ratios(per_side.get(graph, []), eager_rounds, higher)
            f.expect(where, r, key, statistics.median(ratios) if ratios else None)


def check_cuda_micro_partial(f, doc):
    check_cuda_micro(f, doc, partial_file=True)


def check_amp_graphs_partial(f, doc):
    check_amp_graphs(f, doc, partial_file=True)


# bench/run_models.py (models.json; a partial run's models-partial.json): per timed row and round, each
# side's raw output ("rounds"[i][side]: the ms per step of each measurement, or why there is none); the
# round figures, medians, spreads, the reference (the fastest PyTorch side), ratios and verdicts are
# re-derived from them, each peak-memory row from its throughput row's outputs, each loss-curve parity
# row from its two curves. The header follows the one-run GPU suites' rules.

MODELS_SIDES = ("tessera", "torch_eager", "torch_compile", "torch_max_autotune")
MODELS_SEARCH = {"aten": "GEMMs and convolutions from cuBLAS and cuDNN", "full": "Inductor's full search"}
MODELS_RATE_UNITS = ("tokens/s", "images/s", "steps/s")  # "ms" and "GiB": lower is better
MODELS_ENV = ("device", "driver", "cuda", "torch", "torch_cuda", "cudnn", "nccl", "clocks_before", "clocks_after")
MODELS_CLOCKS = {"sm_mhz", "mem_mhz", "max_sm_mhz", "max_mem_mhz", "temperature_c", "power_w"}
MODELS_PARITY_SHAPES = {"small": (16, 256), "124m": (8, 512)}
# The rows of a whole run in the writer's order (peak-memory rows after their throughput rows), then the
# loss-curve rows; a partial run keeps those its --only selects.
MODELS_KEYS = ["gpt2_v50304", "gpt2_v50304_peak", "gpt2_v50304_logits", "gpt2_v50304_logits_peak", "gpt2_v50257",
               "gpt2_v50257_peak", "resnet50", "resnet50_peak", "mlp", "attention_t1024_d64", "attention_t2048_d128"]
MODELS_SETTINGS = {"gpt_batch", "gpt_seq", "resnet_batch", "compile", "max_autotune", "max_autotune_search",
                   "timeout_s", "budget_min", "parity", "parity_steps", "parity_text"}
MODELS_SUMMARY = [s + x for s in MODELS_SIDES for x in ("", "_min", "_max")]
MODELS_COMPARE = ["reference_side", "reference", "reference_value", "reference_min", "reference_max", "ratio",
                  "ratio_min", "ratio_max", "verdict", "ratios", "target", "meets", "peak_mem_gib", "libtorch"]
MODELS_TIMED_KEYS = set(["work", "unit", "key", "programs", "sides", "items_per_step", "rounds", "errors"] +
                        MODELS_SUMMARY + MODELS_COMPARE)
MODELS_PEAK_KEYS = set(["work", "unit", "key", "of", "sides", "rounds"] + MODELS_SUMMARY + MODELS_COMPARE)
MODELS_PARITY_KEYS = {"work", "unit", "key", "config", "batch", "seq", "steps", "window", "tessera", "reference",
                      "reference_value", "ratio", "target", "meets", "torch_eager", "torch_compile",
                      "torch_max_autotune", "libtorch", "peak_mem_gib", "errors"}


def models_higher(unit):
    return unit in MODELS_RATE_UNITS


def models_labels(st):
    """run_models.side_labels: the sides' names, max-autotune's with its search."""
    return {"tessera": "tessera", "torch_eager": "PyTorch eager",
            "torch_compile": "PyTorch torch.compile (default mode)",
            "torch_max_autotune": f"PyTorch torch.compile max-autotune ({MODELS_SEARCH[st['max_autotune_search']]})"}


def models_header(f, doc, partial_file):
    """The GPU environment and clocks (values may be null), the rounds, a partial run in its own file, the
    settings the rows are derived with; returns the settings, or None."""
    for key in MODELS_ENV:
        if key not in doc:
            f.bad(f"header: no {key!r} (bench_io.gpu_environment and gpu_clocks)")
    for key in ("clocks_before", "clocks_after"):
        c = doc.get(key)
        if c is not None and not (isinstance(c, dict) and set(c) == MODELS_CLOCKS and
                                  all(v is None or is_number(v) for v in c.values())):
            f.bad(f"header: {key} is neither null nor bench_io.gpu_clocks()'s fields")
    if partial_file and not (isinstance(doc.get("device"), str) and doc["device"].strip()):
        f.bad(f"header: device {doc.get('device')!r}: a GPU suite names its GPU")
    rounds, partial, only = doc.get("rounds"), doc.get("partial"), doc.get("only")
    timed = any(isinstance(r, dict) and r.get("unit") != "max rel diff" for r in doc.get("rows") or [])
    if not (isinstance(rounds, int) and not isinstance(rounds, bool) and rounds >= (1 if timed else 0)):
        f.bad(f"header: rounds {rounds!r} ({'timed rows' if timed else 'the loss curves alone'})")
    elif not isinstance(partial, bool) or partial != partial_file:
        f.bad(f"header: partial {partial!r} in {'a' if partial_file else 'no'} -partial.json file (a partial run "
              "writes models-partial.json, a whole run models.json)")
    elif not partial and rounds < 3:
        f.bad(f"header: a whole run of {rounds} rounds (at least 3 alternating rounds per side)")
    incomplete = doc.get("incomplete")
    if not (isinstance(incomplete, list) and all(isinstance(x, str) for x in incomplete)):
        f.bad(f"header: incomplete {incomplete!r} is not a list of the row-round-sides without samples")
        incomplete = []
    holes = [f"{r.get('key')} round {i + 1} {s}" for r in doc.get("rows") or []
             if isinstance(r, dict) and "items_per_step" in r and isinstance(r.get("rounds"), list)
             for i, e in enumerate(r["rounds"]) if isinstance(e, dict)
             for s, x in e.items() if not (isinstance(x, dict) and "samples_ms" in x)]
    if sorted(holes) != sorted(x.split(":")[0] for x in incomplete):
        f.bad(f"header: 'incomplete' lists {len(incomplete)}, the rows hold {len(holes)} round-sides without "
              f"samples ({(holes or ['none'])[0]} ...)")
    if partial is False and incomplete:
        f.bad(f"header: a whole run with {len(incomplete)} round-sides without samples (Note [A whole models run]: "
              "that is a partial run)")
    if partial is True and not (isinstance(only, str) and only) and not incomplete:
        f.bad(f"header: a partial run names no --only ({only!r}) and nothing incomplete")
    if partial is False and only is not None:
        f.bad(f"header: only {only!r} in a whole run")
    for key in ("runs_per_round", "iters_per_run", "warmup_steps", "wall_s"):
        if not is_number(doc.get(key)):
            f.bad(f"header: no {key!r}")
    if not (isinstance(doc.get("method"), str) and doc["method"]):
        f.bad("header: no 'method'")
    procs = doc.get("processes")
    if not isinstance(procs, list) or (is_number(rounds) and len(procs) != rounds) or not all(
            isinstance(p, dict) and set(p) <= set(MODELS_SIDES) and
            all(isinstance(x, dict) and isinstance(x.get("status"), str) and is_number(x.get("s")) for x in p.values())
            for p in procs):
        f.bad("header: 'processes' is not one {side: {status, s, ...}} per round")
    if not isinstance(doc.get("parity_processes"), list):
        f.bad("header: no 'parity_processes' list")
    st = doc.get("settings")
    if not isinstance(st, dict) or set(st) != MODELS_SETTINGS or not all(
            isinstance(st.get(k), int) and st[k] > 0 for k in ("gpt_batch", "gpt_seq", "resnet_batch",
                                                              "parity_steps")) \
            or not all(isinstance(st[k], bool) for k in ("compile", "max_autotune", "parity")) \
            or st["max_autotune_search"] not in MODELS_SEARCH:
        f.bad("header: 'settings' are not the writer's (batch sizes, sides, parity steps the rows are derived with)")
        return None
    if doc.get("sides") != models_labels(st):
        f.bad(f"header: sides {doc.get('sides')!r}, the writer's {models_labels(st)!r}")
    return st


def models_row_set(f, doc, st, rows):
    """A whole run has every row (and the loss-curve rows when settings.parity says so), a partial run the
    rows its --only selects (parts of a row's key or tessera program name; "parity": the loss curves), in
    the writer's order."""
    keys = [r.get("key") for _, r in rows]
    timed = [k for k in keys if k in MODELS_KEYS]
    parity = [k for k in keys if k not in MODELS_KEYS]
    if timed != [k for k in MODELS_KEYS if k in timed] or keys != timed + parity:
        f.bad(f"rows {keys} are not in the writer's order")
    if doc.get("partial") is False or not doc.get("only"):  # a whole run, or one cut short: every row
        if timed != MODELS_KEYS:
            f.bad(f"a whole run lacks rows: {sorted(set(MODELS_KEYS) - set(timed))}")
        if bool(parity) != st["parity"]:
            f.bad(f"loss-curve rows {parity} with settings.parity {st['parity']}")
        return
    parts = [p for p in str(doc.get("only") or "").split(",") if p]
    for _, r in rows:
        name = (r.get("programs") or {}).get("tessera", "") if isinstance(r.get("programs"), dict) else ""
        k = r.get("key") if r.get("key") in MODELS_KEYS else None
        base = k[:-len("_peak")] if k and k.endswith("_peak") else k
        if base is not None and not any(p in base or p in name for p in parts) and "of" not in r:
            f.bad(f"row {k!r} is not one that --only {doc.get('only')!r} selects")
    if bool(parity) != ("parity" in parts):
        f.bad(f"loss-curve rows {parity} in a run of --only {doc.get('only')!r}")


def models_torch_sides(st, unit):
    """The PyTorch sides of a row of this unit under these settings (max-autotune: the training rows)."""
    on = {"torch_eager": True, "torch_compile": st["compile"], "torch_max_autotune": st["max_autotune"]}
    sides = MODELS_SIDES[1:] if unit in ("tokens/s", "images/s") else MODELS_SIDES[1:3]
    return [s for s in sides if on[s]]


def models_expect_map(f, where, r, key, want):
    """r[key] is the dict `want` (numbers within REL)."""
    f.derived += 1
    got = r.get(key)
    if not isinstance(got, dict) or set(got) != set(want) or not all(
            (math.isclose(got[k], v, rel_tol=REL, abs_tol=1e-12) if is_number(v) and is_number(got[k])
             else got[k] == v and type(got[k]) is type(v)) for k, v in want.items()):
        f.bad(f"{where}: {key} {got!r}, re-derived {want!r}")


def models_keys(f, where, r, want):
    if set(r) != want:
        extra, missing = sorted(set(r) - want), sorted(want - set(r))
        f.bad(f"{where}: keys differ from the writer's (extra {extra}, missing {missing})")


def models_sides(f, where, r, torch_sides):
    f.expect(where, r, "sides", torch_sides)
    return torch_sides if r.get("sides") == torch_sides else None


def models_compare(f, where, r, unit, sides, figures, target, labels, reference=None):
    """run_models.compare: the reference (the fastest side by median, or the given one), ratio, spread,
    verdict, ratios against every side, target and meets."""
    higher = models_higher(unit)
    medians = {s: (statistics.median(figures[s]) if figures[s] else None) for s in sides}
    if reference is None:
        have = [(s, v) for s, v in medians.items() if v is not None]
        ref = (max if higher else min)(have, key=lambda sv: sv[1])[0] if have else None
    else:
        ref = reference[0] if medians.get(reference[0]) is not None else None
    ts = figures["tessera"]
    f.expect(where, r, "reference_side", ref)
    f.expect(where, r, "reference", labels[ref] if ref else None)
    f.expect(where, r, "reference_value", medians[ref] if ref else None)
    f.expect(where, r, "reference_min", min(figures[ref]) if ref else None)
    f.expect(where, r, "reference_max", max(figures[ref]) if ref else None)

    def oriented(t, o):
        return t / o if higher else o / t

    ratio = oriented(statistics.median(ts), medians[ref]) if ts and ref else None
    if ts and ref:
        lo, hi = ((min(ts) / max(figures[ref]), max(ts) / min(figures[ref])) if higher else
                  (min(figures[ref]) / max(ts), max(figures[ref]) / min(ts)))
    else:
        lo = hi = None
    f.expect(where, r, "ratio", ratio)
    f.expect(where, r, "ratio_min", lo)
    f.expect(where, r, "ratio_max", hi)
    f.expect(where, r, "verdict", verdict(lo, hi) if lo is not None else None)
    models_expect_map(f, where, r, "ratios", {s: oriented(statistics.median(ts), medians[s])
                                              for s in sides if ts and medians[s] is not None})
    f.expect(where, r, "target", target)
    f.expect(where, r, "meets", None if target is None else (ratio is not None and ratio >= target))
    f.expect(where, r, "libtorch", None)


def models_summaries(f, where, r, sides, figures):
    for s in MODELS_SIDES:
        xs = figures.get(s, []) if s == "tessera" or s in sides else []
        f.expect(where, r, s, statistics.median(xs) if xs else None)
        f.expect(where, r, s + "_min", min(xs) if xs else None)
        f.expect(where, r, s + "_max", max(xs) if xs else None)


def models_entry(f, where, e, runs):
    """A side's raw output of one round: {"samples_ms", "peak_mem_bytes", "warmup_s"} or {"error"}."""
    if isinstance(e, dict) and set(e) == {"error"} and isinstance(e["error"], str) and e["error"]:
        return None
    if not isinstance(e, dict) or set(e) != {"samples_ms", "peak_mem_bytes", "warmup_s"}:
        f.bad(f"{where}: neither {{samples_ms, peak_mem_bytes, warmup_s}} nor {{error}}")
        return None
    if not (e["peak_mem_bytes"] is None or (isinstance(e["peak_mem_bytes"], int) and e["peak_mem_bytes"] >= 0)) or \
            not (e["warmup_s"] is None or (is_number(e["warmup_s"]) and e["warmup_s"] >= 0)):
        f.bad(f"{where}: peak_mem_bytes or warmup_s is not a non-negative number or null")
    s = f.samples(where, e, "samples_ms")
    if s is not None and len(s) != runs:
        f.bad(f"{where}: {len(s)} samples, the run takes {runs} measurements per row")
    return s


def check_models_timed(f, where, r, st, rounds, doc_runs):
    """A throughput or time row: a round's figure is the median of its samples (items_per_step * 1000 / ms
    for a rate); the row's figures are the medians and ranges of the rounds'."""
    unit = r.get("unit")
    items = {"tokens/s": st["gpt_batch"] * st["gpt_seq"], "images/s": st["resnet_batch"], "steps/s": 1,
             "ms": None}
    if unit not in items:
        f.bad(f"{where}: unit {unit!r} is none of the writer's")
        return
    models_keys(f, where, r, MODELS_TIMED_KEYS | ({"shape", "tflops"} if unit == "ms" else set()))
    f.expect(where, r, "items_per_step", items[unit])
    sides = models_sides(f, where, r, models_torch_sides(st, unit))
    programs = r.get("programs")
    if not (isinstance(programs, dict) and set(programs) == {"tessera", "torch"} and
            all(isinstance(v, str) and v for v in programs.values())):
        f.bad(f"{where}: programs {programs!r} does not name the two programs' rows")
    raw = r.get("rounds")
    if sides is None or not isinstance(raw, list) or len(raw) != rounds or \
            not all(isinstance(e, dict) and set(e) == {"tessera", *sides} for e in raw):
        f.bad(f"{where}: 'rounds' is not one {{side: output}} per round ({rounds}) for tessera and its sides")
        return
    figures, errors = {s: [] for s in ["tessera"] + sides}, {}
    for i, e in enumerate(raw):
        for s in figures:
            samples = models_entry(f, f"{where} round {i} {s}", e[s], doc_runs)
            if samples is not None:
                ms = statistics.median(samples)
                figures[s].append(items[unit] * 1000.0 / ms if models_higher(unit) else ms)
            elif isinstance(e[s], dict) and "error" in e[s]:
                errors[s] = e[s]["error"]
    models_summaries(f, where, r, sides, figures)
    target = None if unit == "steps/s" else 1.0
    models_compare(f, where, r, unit, sides, figures, target, models_labels(st))
    peaks = [e["tessera"]["peak_mem_bytes"] / 1024.0 ** 3 for e in raw
             if "samples_ms" in e["tessera"] and is_number(e["tessera"].get("peak_mem_bytes"))]
    f.expect(where, r, "peak_mem_gib", statistics.median(peaks) if peaks else None)
    models_expect_map(f, where, r, "errors", errors)
    if unit == "ms":
        shape = r.get("shape")
        if not (isinstance(shape, list) and len(shape) == 4 and all(isinstance(x, int) and x > 0 for x in shape)):
            f.bad(f"{where}: shape {shape!r} is not (B, H, T, D)")
            return
        b, h, t, d = shape
        flops = 7.0 * 2.0 * b * h * d * t * t / 2.0
        models_expect_map(f, where, r, "tflops", {s: flops / (r[s] * 1e9) for s in ["tessera"] + sides
                                                  if is_number(r.get(s)) and r[s]})


def check_models_peak(f, where, r, of, st):
    """A peak-memory row: per round each side's peak bytes of its throughput row's output (null without
    samples), in GiB; the reference is the throughput row's reference side."""
    models_keys(f, where, r, MODELS_PEAK_KEYS)
    if of is None or of.get("unit") not in ("tokens/s", "images/s"):
        f.bad(f"{where}: 'of' {r.get('of')!r} is not the throughput row before it")
        return
    f.expect(where, r, "unit", "GiB")
    f.expect(where, r, "sides", of.get("sides"))
    sides = of.get("sides") if isinstance(of.get("sides"), list) else []
    src = of.get("rounds") if isinstance(of.get("rounds"), list) else []
    want = [{s: (e[s].get("peak_mem_bytes") if isinstance(e.get(s), dict) and "samples_ms" in e[s] else None)
             for s in ["tessera"] + sides} for e in src]
    f.derived += 1
    if r.get("rounds") != want:
        f.bad(f"{where}: rounds are not the peak bytes of the throughput row's outputs")
        return
    figures = {s: [e[s] / 1024.0 ** 3 for e in want if is_number(e[s])] for s in ["tessera"] + sides}
    models_summaries(f, where, r, sides, figures)
    models_compare(f, where, r, "GiB", sides, figures, 1.0, models_labels(st), reference=[of.get("reference_side")])
    f.expect(where, r, "peak_mem_gib", statistics.median(figures["tessera"]) if figures["tessera"] else None)


def check_models_parity(f, where, r, st):
    """A loss-curve parity row: the largest relative difference of the two curves' 10-step means, against
    2% (gpt2_loss_parity.py's rule), or the run's error."""
    ok = "curve_tessera" in r or "curve_torch" in r
    curves = {"curve_tessera", "curve_torch", "torch_model"}
    models_keys(f, where, r, MODELS_PARITY_KEYS | (curves if ok else {"error"}))
    config = r.get("config")
    if config not in MODELS_PARITY_SHAPES:
        f.bad(f"{where}: config {config!r}")
        return
    f.expect(where, r, "batch", MODELS_PARITY_SHAPES[config][0])
    f.expect(where, r, "seq", MODELS_PARITY_SHAPES[config][1])
    f.expect(where, r, "steps", st["parity_steps"])
    f.expect(where, r, "window", 10)
    f.expect(where, r, "reference", "2% of PyTorch's 10-step mean loss")
    f.expect(where, r, "reference_value", 0.02)
    f.expect(where, r, "target", 1.0)
    for key in ("torch_eager", "torch_compile", "torch_max_autotune", "libtorch", "peak_mem_gib"):
        f.expect(where, r, key, None)
    d = None
    if ok:
        a, b = f.samples(where, r, "curve_tessera"), f.samples(where, r, "curve_torch")
        if a is None or b is None:
            return
        if len(a) != st["parity_steps"] or len(b) != len(a):
            f.bad(f"{where}: curves of {len(a)} and {len(b)} steps, the run trains {st['parity_steps']}")
            return
        mean = lambda xs: [sum(xs[i:i + 10]) / len(xs[i:i + 10]) for i in range(0, len(xs), 10)]  # noqa: E731
        d = max(abs(x - y) / abs(y) for x, y in zip(mean(a), mean(b)))
        models_expect_map(f, where, r, "errors", {})
    elif isinstance(r.get("error"), str) and r["error"]:
        models_expect_map(f, where, r, "errors", {"parity": r["error"]})
    else:
        f.bad(f"{where}: neither curves nor the run's error")
    f.expect(where, r, "tessera", d)
    ratio = 0.02 / max(d, 1e-12) if d is not None else None
    f.expect(where, r, "ratio", ratio)
    f.expect(where, r, "meets", ratio is not None and ratio >= 1.0)


def check_models(f, doc, partial_file=False):
    """bench/run_models.py."""
    st = models_header(f, doc, partial_file)
    rows = named_rows(f, doc)
    if st is None:
        return
    models_row_set(f, doc, st, rows)
    rounds, prev, keys = doc.get("rounds"), None, set()
    for where, r in rows:
        if r.get("key") in keys or not (isinstance(r.get("key"), str) and r["key"]):
            f.bad(f"{where}: key {r.get('key')!r} is not a new row key")
        keys.add(r.get("key"))
        if r.get("unit") == "max rel diff":
            check_models_parity(f, where, r, st)
        elif "of" in r:
            check_models_peak(f, where, r, prev if prev is not None and prev.get("work") == r["of"] else None, st)
        else:
            check_models_timed(f, where, r, st, rounds, doc.get("runs_per_round"))
            prev = r


def check_models_partial(f, doc):
    check_models(f, doc, partial_file=True)


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
    ("cuda-micro.json", None, check_cuda_micro), ("cuda-micro-partial.json", "cuda-micro", check_cuda_micro_partial),
    ("amp-graphs.json", None, check_amp_graphs), ("amp-graphs-partial.json", "amp-graphs", check_amp_graphs_partial),
    ("models.json", None, check_models), ("models-partial.json", "models", check_models_partial),
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
    for p in machine_paths(doc):
        f.bad(f"{p} names an absolute path of the machine that ran it")
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
