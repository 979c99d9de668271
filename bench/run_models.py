#!/usr/bin/env python3
"""Runs tessera's model benchmarks (build/bench/bench_models) and the same work in PyTorch
(bench/torch/models.py, eager and torch.compile) on this machine's GPU, in alternating rounds, then the
GPT-2 loss-curve parity check (bench/gpt2_loss_parity.py), prints ONE table and writes
bench/results/models.json in DESIGN.md's format. Builds nothing.

Rows (ratio oriented so that higher is better for tessera; figures: median over rounds):
  GPT-2 124M training tokens/s        tessera / PyTorch torch.compile, target 1.0 (ratio_eager beside it);
  GPT-2 124M peak memory              PyTorch eager GiB / tessera GiB, target 1.0;
  ResNet-50 training images/s         tessera / PyTorch eager, target 1.0;
  MLP 784-512-512-10 step steps/s     tessera / PyTorch eager, no target here (the amp-graphs suite has it);
  causal attention fwd+bwd ms         PyTorch eager ms / tessera ms, target 1.0 (F.scaled_dot_product_attention);
  GPT-2 loss-curve parity             2% / (max relative difference of the 10-step mean losses), target 1.0;
                                      one row per config (small, 124m), on Python's sources; each carries
                                      both curves.
The CUDA micro-benchmarks are bench/run_cuda_micro.py's (./run bench runs both).
Exit status: 0 when every row with a target meets it, 1 otherwise, 2 when tessera's side did not run.
"""
import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id, gpu_info, run  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GIB = 1024.0 ** 3


def med(runs, name, key="value"):
    vals = [r[name][key] for r in runs if name in r and isinstance(r[name].get(key), (int, float))]
    return statistics.median(vals) if vals else None


def last_error(runs, name):
    errs = [r[name]["error"] for r in runs if name in r and r[name].get("error")]
    return errs[-1] if errs else None


def rnd(x, n=4):
    return None if x is None else round(x, n)


def div(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def row(work, unit, tessera, reference, ref_value, ratio, target, eager, compiled, peak, **extra):
    r = {"work": work, "unit": unit, "tessera": rnd(tessera), "reference": reference,
         "reference_value": rnd(ref_value), "ratio": rnd(ratio, 3), "target": target,
         "meets": (ratio is not None and ratio >= target) if target is not None else None,
         "torch_eager": rnd(eager), "torch_compile": rnd(compiled), "peak_mem_gib": rnd(peak, 3)}
    r.update(extra)
    return r


def build_rows(a, ts_runs, eager_runs, compile_runs):
    B, T, RB = a.gpt_batch, a.gpt_seq, a.resnet_batch
    rows = []

    def sides(name, key="value"):
        return med(ts_runs, name, key), med(eager_runs, name, key), med(compile_runs, name, key)

    def peaks(name):
        return tuple(None if x is None else x / GIB for x in sides(name, "peak_mem_bytes"))

    def errors(name):
        e = {}
        if last_error(ts_runs, name) and med(ts_runs, name) is None:
            e["error"] = last_error(ts_runs, name)
        return e

    gpt = f"gpt2_124m_train_b{B}x{T}"
    t, e, c = sides(gpt)
    pt, pe, pc = peaks(gpt)
    rows.append(row(f"GPT-2 124M training, batch {B} x {T}, bf16 autocast, fused AdamW, clip 1.0", "tokens/s", t,
                    "PyTorch torch.compile", c, div(t, c), 1.0, e, c, pt, ratio_eager=rnd(div(t, e), 3),
                    peak_mem_gib_torch_eager=rnd(pe, 3), peak_mem_gib_torch_compile=rnd(pc, 3), **errors(gpt)))
    rows.append(row(f"GPT-2 124M training peak memory (batch {B} x {T})", "GiB", pt, "PyTorch eager", pe,
                    div(pe, pt), 1.0, pe, pc, pt))

    rn = f"resnet50_train_b{RB}_224_cl_bf16"
    t, e, c = sides(rn)
    pt, pe, pc = peaks(rn)
    rows.append(row(f"ResNet-50 training, batch {RB}, 224x224, channels-last, bf16, SGD momentum",
                    "images/s", t, "PyTorch eager", e, div(t, e), 1.0, e, c, pt,
                    ratio_compile=rnd(div(t, c), 3), peak_mem_gib_torch_eager=rnd(pe, 3),
                    peak_mem_gib_torch_compile=rnd(pc, 3), **errors(rn)))

    mlp = "mlp_784_512_512_10_b128_sgd"
    t, e, c = sides(mlp)
    rows.append(row("MLP 784-512-512-10 b128 f32 SGD momentum step", "steps/s", t, "PyTorch eager", e, div(t, e),
                    None, e, c, peaks(mlp)[0], ratio_compile=rnd(div(t, c), 3), **errors(mlp)))

    for (b, h, tt, d) in ((16, 12, 1024, 64), (8, 16, 2048, 128)):
        at = f"attention_causal_fwd_bwd_bf16_b{b}_h{h}_t{tt}_d{d}"
        t, e, c = sides(at)
        tf = med(ts_runs, at + "_tflops")
        rows.append(row(f"causal attention fwd+bwd bf16 B{b} H{h} T{tt} D{d}", "ms", t, "PyTorch eager SDPA", e,
                        div(e, t), 1.0, e, c, peaks(at)[0], tessera_tflops=rnd(tf, 1),
                        torch_eager_tflops=rnd(med(eager_runs, at + "_tflops"), 1), **errors(at)))
    return rows


PARITY_SHAPES = {"small": (16, 256), "124m": (8, 512)}  # batch, sequence of each loss-curve run


def parity_row(a, config):
    out = tempfile.mktemp(suffix=".json", prefix="gpt2_parity_")
    batch, seq = PARITY_SHAPES[config]
    cmd = [a.python, os.path.join(ROOT, "bench", "gpt2_loss_parity.py"), "--build", a.build, "--steps",
           str(a.parity_steps), "--config", config, "--batch", str(batch), "--seq", str(seq), "--json-out", out]
    cmd += [] if a.parity_text == "markov" else ["--text", a.parity_text]
    print(f"==> loss-curve parity: {' '.join(cmd)}", file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    print(p.stdout, file=sys.stderr)
    text = {"python": "Python's sources", "markov": "Markov text"}.get(a.parity_text, os.path.basename(a.parity_text))
    work = (f"GPT-2 loss-curve parity ({config} config, b{batch}x{seq}, {text}, {a.parity_steps} steps, "
            "same weights and batches)")
    if not os.path.exists(out):
        print(f"loss-curve parity: exit status {p.returncode}\n{p.stderr[-3000:]}", file=sys.stderr)
        return row(work, "max rel diff", None, "2% of PyTorch's 10-step mean loss", 0.02, None, 1.0, None, None,
                   None, error=p.stderr[-500:])
    with open(out) as f:
        r = json.load(f)
    os.unlink(out)
    d = r["max_rel_diff"]
    return row(work, "max rel diff", d, "2% of PyTorch's 10-step mean loss", 0.02, 0.02 / max(d, 1e-12), 1.0, None,
               None, None, torch_model=r["torch_model"], curve_tessera=[round(x, 5) for x in r["tessera"]],
               curve_torch=[round(x, 5) for x in r["torch"]])


def fmt(x, w, d=1):
    if not isinstance(x, (int, float)):
        return f"{'-':>{w}s}"
    return f"{x:{w},.{d}f}" if abs(x) >= 100 else f"{x:{w}.{max(d, 3)}f}"


def print_table(rows):
    print(f"{'work':<78} {'unit':<9} {'tessera':>11} {'PT eager':>11} {'PT compile':>11} {'t/eager':>8} "
          f"{'t/compile':>9}  peak GiB t / eager / compile   meets")
    for r in rows:
        if r["unit"] == "max rel diff":
            print(f"{r['work']:<78} {r['unit']:<9} {fmt(r['tessera'], 11)} {'':>11} {'':>11} {'':>8} {'':>9}  "
                  f"{'':30} {r['meets']}")
            continue
        t, e, c = r["tessera"], r["torch_eager"], r["torch_compile"]
        lower_better = r["unit"] in ("ms", "GiB")
        re_ = div(e, t) if lower_better else div(t, e)
        rc = div(c, t) if lower_better else div(t, c)
        pk = " / ".join(f"{x:.2f}" if isinstance(x, (int, float)) else "-" for x in
                        (r.get("peak_mem_gib"), r.get("peak_mem_gib_torch_eager"), r.get("peak_mem_gib_torch_compile")))
        print(f"{r['work'][:78]:<78} {r['unit']:<9} {fmt(t, 11)} {fmt(e, 11)} {fmt(c, 11)} {fmt(re_, 8, 3)} "
              f"{fmt(rc, 9, 3)}  {pk:<30} {r['meets']}" + (f"  ERROR {r['error'][:80]}" if r.get("error") else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--python", default=os.environ.get("TESSERA_PYTHON", "/usr/bin/python3"),
                    help="the Python whose torch (built with CUDA) runs the PyTorch side")
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds of the three sides")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--only", default="", help="only the rows whose name contains this ('parity': the loss-curve run)")
    ap.add_argument("--gpt-batch", type=int, default=16)
    ap.add_argument("--gpt-seq", type=int, default=1024)
    ap.add_argument("--resnet-batch", type=int, default=256)
    ap.add_argument("--no-compile", dest="compile", action="store_false", help="skip torch.compile")
    ap.add_argument("--no-parity", dest="parity", action="store_false", help="skip the loss-curve parity run")
    ap.add_argument("--parity-steps", type=int, default=200)
    ap.add_argument("--parity-configs", default="small,124m",
                    help="the loss-curve runs: comma-separated configs of bench_models (small, 124m)")
    ap.add_argument("--parity-text", default="python",
                    help="their text: 'python' (the Python standard library's sources), 'markov' (bench_models' "
                    "seeded order-2 Markov text, whose plateau ends in a loss spike that small rounding differences "
                    "move), or a file")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds per program run")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench/results/models.json"))
    a = ap.parse_args()
    bad = [c for c in a.parity_configs.split(",") if c not in PARITY_SHAPES]
    if bad:
        ap.error(f"--parity-configs: unknown {', '.join(bad)} (expected {', '.join(PARITY_SHAPES)})")

    binary = os.path.join(a.build, "bench", "bench_models")
    if not os.path.exists(binary):
        print(f"{binary} not found: build the cuda preset's bench_models first", file=sys.stderr)
        return 2
    common = ["--runs", str(a.runs), "--iters", str(a.iters), "--warmup", str(a.warmup), "--gpt-batch",
              str(a.gpt_batch), "--gpt-seq", str(a.gpt_seq), "--resnet-batch", str(a.resnet_batch)]
    common += ["--only", a.only] if a.only else []
    torch_py = os.path.join(ROOT, "bench", "torch", "models.py")
    ts_runs, eager_runs, compile_runs, torch_header = [], [], [], {}
    parity_only = a.only == "parity"  # no timed model: the loss curves alone
    for r in range(0 if parity_only else a.rounds):
        h, rows = run([binary] + common, f"tessera (round {r + 1})", a.timeout, announce=True)
        ts_runs.append(rows)
        h, rows = run([a.python, torch_py] + common, f"PyTorch eager (round {r + 1})", a.timeout, announce=True)
        torch_header.update(h)
        eager_runs.append(rows)
        if a.compile:
            h, rows = run([a.python, torch_py, "--compile"] + common, f"PyTorch compile (round {r + 1})", a.timeout,
                           announce=True)
            compile_runs.append(rows)
    if not parity_only and not any(ts_runs):
        print("tessera's side produced no rows", file=sys.stderr)
        return 2
    rows = build_rows(a, ts_runs, eager_runs, compile_runs) if ts_runs else []
    if a.parity and (not a.only or "parity" in a.only):  # --only parity: the loss curves alone
        for config in a.parity_configs.split(","):
            rows.append(parity_row(a, config))

    name, driver = gpu_info()
    commit = commit_id(ROOT)
    doc = {"suite": "models", "device": name, "driver": driver, "commit": commit,
           "date": datetime.date.today().isoformat(), "torch": torch_header.get("torch"), "rounds": a.rounds,
           "runs_per_round": a.runs, "iters_per_run": a.iters, "rows": rows}
    for r in rows:  # each row says where it was measured: a partial run keeps older rows beside it
        r.setdefault("commit", commit)
        r.setdefault("date", doc["date"])
    if a.only and os.path.exists(a.out):  # a partial run replaces only its rows
        with open(a.out) as f:
            old = json.load(f)
        # A measured row replaces the stored row of the same work (same setting); a row that failed
        # replaces nothing. Rows of other settings stay.
        ours = {r["work"] for r in rows if r["tessera"] is not None or r["torch_eager"] is not None}
        kept = [dict(r, commit=r.get("commit", old.get("commit")), date=r.get("date", old.get("date")))
                for r in old.get("rows", []) if r["work"] not in ours]
        doc["rows"] = kept + [r for r in rows if r["work"] in ours]
        doc["commit"] = "per row"  # the rows come from several runs
        doc["torch"] = doc["torch"] or old.get("torch")  # a parity-only run times no PyTorch model
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(f"models on {name} (driver {driver}), torch {torch_header.get('torch')}, commit {commit}")
    print_table(doc["rows"])
    print(f"written: {a.out}")
    return 0 if all(r["meets"] in (None, True) for r in doc["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
