#!/usr/bin/env python3
"""The models suite's writer (bench/run_models.py) against its checker (test_results.check_models),
without a GPU: documents built by the writer's own build_document() from synthetic raw samples, and by
the whole writer run against stand-in programs, must pass the checker, and every figure of them, altered
or removed, must fail it (so a figure the writer adds without a check fails here). Standard library only.

1. build_document on synthetic runs: three rounds; four rounds (medians of two) with a side that failed
   in one round, a process stopped before its later rows and a side that never ran (a peak-memory row
   whose reference side has no figures); a partial run with a parity row that ran and one that failed.
2. The writer end to end (run_models.py main, as on the GPU machine) with stand-ins for bench_models,
   the PyTorch Python, gpt2_loss_parity.py and nvidia-smi: a whole run writes models.json with every side
   measured in every round, Inductor's cache is cold for the first compiling process only; a run with
   faults (a process stopped at its time limit keeps the rows it printed, a row that raised records its
   error) is cut short and writes models-partial.json naming its holes; a partial run (timed rows, or the
   loss curves alone) writes models-partial.json; neither touches models.json, no temporary file is left,
   and the table says "parity"; --warm-caches-only runs the two Inductor sides once, needs no build and
   writes nothing.
Prints what it checked; exit status 1 on any failure.
"""
import copy
import json
import os
import random
import shutil
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, HERE)
import run_models  # noqa: E402
import test_results  # noqa: E402

FAILURES = []

# Keys that hold no derived figure: the row's names, its raw samples and free text.
NOT_FIGURES = {"work", "key", "programs", "rounds", "curve_tessera", "curve_torch", "torch_model", "error"}


def problems(doc, partial):
    f = test_results.Findings()
    test_results.check_header(f, doc, "models", True)
    test_results.check_models(f, doc, partial_file=partial)
    return f.problems


def expect(cond, what):
    if not cond:
        FAILURES.append(what)
        print(f"FAIL  {what}")


def mutated(x):
    if isinstance(x, bool):
        return not x
    if x is None:
        return 1.5
    if isinstance(x, int):
        return x + 1
    if isinstance(x, float):
        return x * 1.01 + 0.01
    if isinstance(x, str):
        return x + " (edited)"
    if isinstance(x, list):
        return x + [x[-1]] if x else [1.0]
    if isinstance(x, dict):
        return dict(x, edited=1.0)
    raise TypeError(type(x))


def mutations(doc):
    """(description, altered copy) for every figure of every row (changed, and removed) and the header's
    figures."""
    for i, r in enumerate(doc["rows"]):
        for k, v in r.items():
            if k in NOT_FIGURES:
                continue
            d = copy.deepcopy(doc)
            d["rows"][i][k] = mutated(v)
            yield f"row {r['key']} {k} changed", d
            d = copy.deepcopy(doc)
            del d["rows"][i][k]
            yield f"row {r['key']} {k} removed", d
            if isinstance(v, dict):
                for kk, vv in v.items():
                    d = copy.deepcopy(doc)
                    d["rows"][i][k][kk] = mutated(vv)
                    yield f"row {r['key']} {k}.{kk} changed", d
        timed = [(j, s) for j, e in enumerate(r.get("rounds", [])) if isinstance(e, dict)
                 for s, x in e.items() if isinstance(x, dict) and "samples_ms" in x]
        if timed:  # one raw sample of each kind: every sample of one round's side, scaled
            j, s = timed[0]
            d = copy.deepcopy(doc)
            d["rows"][i]["rounds"][j][s]["samples_ms"] = [x * 1.5 for x in r["rounds"][j][s]["samples_ms"]]
            yield f"row {r['key']} round {j} {s} samples scaled", d
        if "curve_tessera" in r:
            d = copy.deepcopy(doc)
            d["rows"][i]["curve_tessera"] = [x * 1.2 for x in r["curve_tessera"]]
            yield f"row {r['key']} tessera curve scaled", d
    timed = any(r["unit"] != "max rel diff" for r in doc["rows"])
    for k in ("suite", "commit", "date", "rounds", "partial", "only", "clocks_before", "sides", "settings",
              "processes") + (("runs_per_round",) if timed else ()):  # the samples' count, where there are any
        d = copy.deepcopy(doc)
        d[k] = mutated(doc[k]) if k != "clocks_before" else "1980 MHz"
        yield f"header {k} changed", d
    for k in ("device", "driver", "cuda", "torch", "torch_cuda", "cudnn", "nccl", "clocks_after", "method"):
        d = copy.deepcopy(doc)
        del d[k]
        yield f"header {k} removed", d


def check_doc(label, doc, partial):
    found = problems(doc, partial)
    expect(not found, f"{label}: the writer's document fails its checker: {found[:5]}")
    n = missed = 0
    for what, d in mutations(doc):
        n += 1
        if not problems(d, partial):
            missed += 1
            expect(False, f"{label}: {what}: not detected")
    print(f"{'ok' if not found and not missed else 'FAIL'}  {label}: {len(doc['rows'])} rows pass; "
          f"{n - missed} of {n} alterations detected")


# ---------------------------------------------------------------------------------------------------
# 1. build_document on synthetic raw samples.

BASE = {"torch_eager": 0.9, "torch_compile": 1.1, "torch_max_autotune": 1.12, "tessera": 1.0}


def settings(**over):
    st = {"gpt_batch": 16, "gpt_seq": 1024, "resnet_batch": 256, "only": "", "parity": False, "compile": True,
          "max_autotune": True, "rounds": 3, "runs": 7, "iters": 3, "warmup": 5, "max_autotune_search": "aten",
          "timeout_s": 600, "budget_min": 15.0, "parity_steps": 200, "parity_text": "python"}
    st.update(over)
    return st


def output(rng, name, side, i, ms0, runs):
    """A program's JSON line for one row: ms per step around ms0 / (the side's speed)."""
    ms = ms0 / BASE[side] * (1 + 0.02 * i)
    samples = [ms * (1 + 0.01 * rng.uniform(-1, 1)) for _ in range(runs)]
    return {"name": name, "unit": "x", "value": 1.0, "ms": ms, "samples_ms": samples,
            "peak_mem_bytes": rng.randrange(1 << 30, 16 << 30), "warmup_s": rng.uniform(1, 30)}


def synthetic_rounds(st, rng, broken=False):
    """rounds[i][side] = {"rows", "status"} as run_models.main collects them."""
    specs = run_models.selected_specs(st)
    rounds = []
    for i in range(st["rounds"]):
        rd = {}
        for side in run_models.SIDES:
            names = {s["ts"] if side == "tessera" else s["pt"] for s in specs
                     if side == "tessera" or side in s["sides"]}
            if not names:
                continue
            rows = {n: output(rng, n, side, i, 30.0 + len(n), st["runs"]) for n in sorted(names)}
            status = "ok"
            if broken and side == "torch_max_autotune":
                continue  # never ran: every row's max-autotune entries say so
            if broken and side == "torch_compile" and i == 1:
                rows = {n: r for n, r in list(rows.items())[:1]}
                status = "stopped at its time limit (600 s)"
            if broken and side == "tessera" and i == 2:
                first = sorted(names)[0]
                rows[first] = {"name": first, "value": None, "error": "RuntimeError: out of memory"}
            rd[side] = {"rows": rows, "status": status}
        rounds.append(rd)
    return rounds


def synthetic_run(st, rng, broken=False, parity=None):
    rounds = synthetic_rounds(st, rng, broken)
    return {"settings": st, "rounds": rounds, "parity": parity or {},
            "env": {"device": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0.88", "torch": "2.11.0+cu130",
                    "torch_cuda": "13.0", "cudnn": 91400, "nccl": "2.27.7"},
            "clocks_before": {k: 1.0 for k in test_results.MODELS_CLOCKS}, "clocks_after": None,
            "commit": "1a2b3c4", "date": "2026-12-03", "wall_s": 812.5,
            "processes": [{s: {"status": p["status"], "s": 10.0, "timeout_s": 600,
                               "inductor_cache": "cold" if i == 0 else "warm"} for s, p in rd.items()}
                          for i, rd in enumerate(rounds)],
            "parity_processes": []}


def curve(rng, n, scale=1.0):
    return [scale * (5.5 - 3.0 * k / n) + rng.uniform(0, 0.05) for k in range(n)]


def part1():
    rng = random.Random(7)
    doc = run_models.build_document(synthetic_run(settings(), rng))
    keys = [r["key"] for r in doc["rows"]]
    expect(keys[:2] == ["gpt2_v50304", "gpt2_v50304_peak"], f"the headline row and its peak row lead: {keys[:2]}")
    logits = next(r for r in doc["rows"] if r["key"] == "gpt2_v50304_logits")
    head = doc["rows"][0]
    expect(logits["rounds"][0]["torch_eager"] == head["rounds"][0]["torch_eager"],
           "the full-logits row holds the headline row's PyTorch samples (the same program)")
    expect(head["reference_side"] == "torch_max_autotune", "the fastest PyTorch side is the reference")
    expect(doc["rows"][1]["reference_side"] == head["reference_side"],
           "the peak row takes its throughput row's reference")
    check_doc("build_document, 3 rounds", doc, partial=False)

    st = settings(rounds=4)
    doc = run_models.build_document(synthetic_run(st, rng, broken=True))
    err = [r for r in doc["rows"] if r.get("errors")]
    expect(err and all("torch_max_autotune" in r["errors"] for r in err if "torch_max_autotune" in r["sides"]),
           "a side that never ran records its error in every row of it")
    expect(doc["partial"] is True and doc["only"] is None and any("torch_max_autotune" in x for x in doc["incomplete"]),
           f"a run with sides without samples is a partial run that names them: {doc['incomplete'][:2]}")
    check_doc("build_document, 4 rounds, failed sides", doc, partial=True)

    # A peak row whose reference side has no peak figures: no reference, no ratio, meets false.
    st = settings(only="resnet50")
    run = synthetic_run(st, rng)
    for rd in run["rounds"]:
        for side, p in rd.items():
            for o in p["rows"].values():
                if side == "torch_max_autotune":
                    o["peak_mem_bytes"] = -1  # a program that could not read its peak
    doc = run_models.build_document(run)
    peak = next(r for r in doc["rows"] if r["key"] == "resnet50_peak")
    want = doc["rows"][0]["reference_side"] == "torch_max_autotune"
    expect(not want or (peak["reference_side"] is None and peak["meets"] is False),
           f"a peak row without its reference side's figures has no ratio: {peak['reference_side']}, {peak['meets']}")
    check_doc("build_document, partial resnet50 without max-autotune peaks", doc, partial=True)

    st = settings(only="gpt2,parity")
    parity = {"small": {"tessera": curve(rng, 200), "torch": curve(rng, 200), "torch_model": "stand-in"},
              "124m": {"error": "exit status 1: CUDA out of memory"}}
    doc = run_models.build_document(synthetic_run(st, rng, parity=parity))
    rows = {r["key"]: r for r in doc["rows"]}
    expect("parity_small" in rows and rows["parity_124m"]["meets"] is False, "parity rows: one measured, one failed")
    expect(all(not k.startswith(("resnet", "mlp", "attention")) for k in rows), "--only gpt2 keeps only GPT-2 rows")
    check_doc("build_document, partial gpt2 + parity", doc, partial=True)

    # Spread: a ratio whose spread holds 1.0 is parity.
    r = {}
    run_models.compare(r, "tokens/s", ("torch_eager",), {"tessera": [99.0, 101.0, 100.0],
                                                        "torch_eager": [100.5, 99.5, 100.0]}, 1.0,
                       run_models.side_labels(settings()))
    expect(r["verdict"] == "parity" and r["meets"] is True, f"overlapping spreads are parity: {r['verdict']}")


# ---------------------------------------------------------------------------------------------------
# 2. The writer end to end against stand-in programs.

STAND_IN = r'''#!PYTHON
# A stand-in for ROLE in tests/bench/test_models_writer.py: prints what the real one prints.
import json, os, sys, time, zlib
role, args = "ROLE", sys.argv[1:]
state = os.path.join(os.path.dirname(os.path.abspath(__file__)), "state")
os.makedirs(state, exist_ok=True)

def arg(flag, default=None):
    return args[args.index(flag) + 1] if flag in args else default

def count(side):
    p = os.path.join(state, side)
    n = int(open(p).read()) + 1 if os.path.exists(p) else 1
    open(p, "w").write(str(n))
    return n

def rows(side, speed, names, stop_after=None, fail=None):
    runs = int(arg("--runs", 7))
    for k, name in enumerate(names):
        if stop_after is not None and k == stop_after:
            time.sleep(60)  # past the time limit
        if fail and fail in name:
            print(json.dumps({"name": name, "value": None, "error": "RuntimeError: stand-in failure"}), flush=True)
            continue
        h = zlib.crc32((side + name).encode()) % 100 / 1000.0
        ms = (20.0 + len(name)) / speed * (1 + h)
        s = [ms * (1 + 0.003 * ((i * 7) % 5 - 2)) for i in range(runs)]
        print(json.dumps({"name": name, "unit": "x", "value": 1.0, "ms": ms, "peak_mem_bytes": 1 << 33,
                          "samples_ms": s, "warmup_s": 0.5}), flush=True)

if role == "nvidia-smi":
    q = [a for a in args if a.startswith("--query-gpu=")][0]
    print("1980, 3201, 1980, 3201, 41, 120.5" if "clocks" in q else "NVIDIA H200, 580.159.04")
elif role == "bench_models":
    print(json.dumps({"device": "NVIDIA H200"}))
    rows("tessera", 1.0, arg("--only").split(","))
elif args and args[0] == "-c":
    print(json.dumps({"torch": "2.11.0", "torch_cuda": "13.0", "cudnn": 91400, "nccl": "2.27.7"}))
elif args[0].endswith("models.py"):
    mode = arg("--compile", None) if "--compile" in args else None
    if "--compile" in args and mode is None or (mode or "").startswith("--"):
        mode = "default"
    side = {None: "torch_eager", "default": "torch_compile", "max-autotune": "torch_max_autotune"}[mode]
    n = count(side)
    if mode:
        cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        os.makedirs(cache, exist_ok=True)
        open(os.path.join(cache, "entry"), "w").write("x")
    speed = {"torch_eager": 0.8, "torch_compile": 1.0, "torch_max_autotune": 1.05}[side]
    faults = os.environ.get("STAND_IN_FAULTS") == "1"
    rows(side, speed, arg("--only").split(","),
         stop_after=1 if faults and side == "torch_max_autotune" and n == 2 else None,
         fail="mlp" if faults and side == "torch_compile" and n == 1 else None)
elif args[0].endswith("gpt2_loss_parity.py"):
    if arg("--config") == "124m":
        print("stand-in: CUDA out of memory", file=sys.stderr)
        sys.exit(1)
    steps = int(arg("--steps"))
    a = [5.5 - 3.0 * k / steps for k in range(steps)]
    json.dump({"tessera": a, "torch": [x * 1.001 for x in a], "torch_model": "stand-in GPT-2",
               "max_rel_diff": 0.001}, open(arg("--json-out"), "w"))
'''


def stand_in(path, role):
    with open(path, "w") as f:
        f.write(STAND_IN.replace("PYTHON", sys.executable).replace("ROLE", role))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def writer(tmp, *extra, faults=False):
    env = dict(os.environ, PATH=os.path.join(tmp, "bin") + os.pathsep + os.environ.get("PATH", ""),
               TESSERA_COMMIT="1a2b3c4", TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"),
               STAND_IN_FAULTS="1" if faults else "0")
    cmd = [sys.executable, os.path.join(ROOT, "bench", "run_models.py"), "--build", os.path.join(tmp, "build"),
           "--python", os.path.join(tmp, "bin", "python"), "--out", os.path.join(tmp, "results", "models.json"),
           "--runs", "3", "--timeout", "4", "--budget-min", "0"] + list(extra)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def part2():
    with tempfile.TemporaryDirectory(prefix="models_writer_") as tmp:
        os.makedirs(os.path.join(tmp, "bin"))
        os.makedirs(os.path.join(tmp, "build", "bench"))
        stand_in(os.path.join(tmp, "bin", "nvidia-smi"), "nvidia-smi")
        stand_in(os.path.join(tmp, "bin", "python"), "python")
        stand_in(os.path.join(tmp, "build", "bench", "bench_models"), "bench_models")
        results = os.path.join(tmp, "results")

        p = writer(tmp, "--parity")
        expect(p.returncode in (0, 1), f"the whole run exits 0 or 1, not {p.returncode}: {p.stderr[-2000:]}")
        full = os.path.join(results, "models.json")
        if not os.path.exists(full):
            expect(False, "the whole run wrote no models.json")
            return
        with open(full) as f:
            doc = json.load(f)
        expect(doc["partial"] is False and doc["rounds"] == 3 and doc["incomplete"] == [],
               "a whole run of 3 rounds, every side measured in each")
        procs = doc["processes"]
        expect([pr["torch_compile"]["inductor_cache"] for pr in procs] == ["cold", "warm", "warm"],
               f"Inductor's cache cold for the first compiling process only: {procs}")
        expect(" parity " in p.stdout, "the table says parity")
        check_doc("run_models.py, whole run with stand-ins", doc, partial=False)

        # A run with faults (a process stopped at its limit, a row that raised) is cut short: it writes
        # models-partial.json naming its holes and leaves models.json as it was (Note [A whole models run]).
        before = open(full).read()
        shutil.rmtree(os.path.join(tmp, "bin", "state"), ignore_errors=True)
        p = writer(tmp, "--parity", faults=True)
        part = os.path.join(results, "models-partial.json")
        expect(p.returncode in (0, 1) and os.path.exists(part) and open(full).read() == before,
               f"a run with holes writes models-partial.json, not models.json: {p.stderr[-1500:]}")
        if not os.path.exists(part):
            return
        with open(part) as f:
            doc = json.load(f)
        rows = {r["key"]: r for r in doc["rows"]}
        procs = doc["processes"]
        expect(doc["partial"] is True and doc["only"] is None and
               "mlp round 1 torch_compile: RuntimeError: stand-in failure" in doc["incomplete"] and
               any(x.startswith("resnet50 round 2 torch_max_autotune") for x in doc["incomplete"]),
               f"the partial run names its holes: {doc['incomplete']}")
        expect("time limit" in procs[1]["torch_max_autotune"]["status"],
               f"round 2's max-autotune process stopped: {procs[1]['torch_max_autotune']}")
        head = rows["gpt2_v50304"]
        expect("samples_ms" in head["rounds"][1]["torch_max_autotune"],
               "the stopped process's first row is kept")
        expect("error" in rows["resnet50"]["rounds"][1]["torch_max_autotune"],
               "its later rows record why they have no samples")
        expect(rows["mlp"]["errors"].get("torch_compile") == "RuntimeError: stand-in failure",
               f"a row that raised records its error: {rows['mlp']['errors']}")
        expect(rows["parity_small"]["meets"] is True and "parity" in rows["parity_124m"]["errors"],
               "parity rows: one measured, one failed")
        check_doc("run_models.py, a run cut short with stand-ins", doc, partial=True)

        p = writer(tmp, "--only", "resnet50,attention")
        expect(p.returncode in (0, 1) and os.path.exists(part),
               f"a partial run writes models-partial.json: {p.stderr[-1500:]}")
        expect(open(full).read() == before, "a partial run leaves models.json as it was")
        if os.path.exists(part):
            with open(part) as f:
                pdoc = json.load(f)
            expect({r["key"] for r in pdoc["rows"]} == {"resnet50", "resnet50_peak", "attention_t1024_d64",
                                                        "attention_t2048_d128"}, "the partial run's rows")
            check_doc("run_models.py --only resnet50,attention with stand-ins", pdoc, partial=True)
        p = writer(tmp, "--only", "parity")
        with open(part) as f:
            pdoc = json.load(f)
        expect(p.returncode == 1 and pdoc["rounds"] == 0 and [r["key"] for r in pdoc["rows"]] ==
               ["parity_small", "parity_124m"], f"--only parity: the loss curves alone, one failed: {p.returncode}")
        check_doc("run_models.py --only parity with stand-ins", pdoc, partial=True)
        expect(open(full).read() == before, "a partial run leaves models.json as it was")
        left = sorted(set(os.listdir(results)) - {"models.json", "models-partial.json"})
        expect(not left, f"no temporary file left: {left}")

        # --warm-caches-only (Note [Warming Inductor's caches]): the two Inductor sides once each, with no
        # build, into a cache of their own; nothing written.
        before_files = sorted(os.listdir(results))
        env = dict(os.environ, PATH=os.path.join(tmp, "bin") + os.pathsep + os.environ.get("PATH", ""),
                   TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor-warm"), STAND_IN_FAULTS="0")
        cmd = [sys.executable, os.path.join(ROOT, "bench", "run_models.py"), "--warm-caches-only", "--build",
               os.path.join(tmp, "no-build"), "--python", os.path.join(tmp, "bin", "python"), "--out",
               os.path.join(results, "models.json"), "--runs", "1", "--timeout", "20", "--budget-min", "0"]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
        lines = [l for l in p.stdout.splitlines() if l.startswith("torch_")]
        expect(p.returncode == 0 and len(lines) == 2 and all(": ok in " in l for l in lines) and
               "cache was cold" in lines[0] and "cache was warm" in lines[1],
               f"--warm-caches-only runs torch.compile then max-autotune, the second finding the cache warm: "
               f"{p.returncode} {lines} {p.stderr[-800:]}")
        expect(sorted(os.listdir(results)) == before_files and open(full).read() == before,
               "--warm-caches-only writes no file")
        p = subprocess.run(cmd + ["--python", "/bin/false"], capture_output=True, text=True, env=env, timeout=300)
        expect(p.returncode == 1, f"a warm-up whose processes fail exits 1, not {p.returncode}")


def main():
    part1()
    part2()
    print(f"{'FAIL' if FAILURES else 'ok'}    models writer against its checker: {len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
