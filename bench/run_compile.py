#!/usr/bin/env python3
"""Runs build/bench/bench_compile (ts::compile's capture time and per-call cost against eager) and writes
bench/results/compile-<device>.json in DESIGN.md's format, with every raw sample. Builds nothing.

Rows (ratio oriented so that higher is better for tessera; figures: median over the rounds, which
alternate graph calls and eager calls inside one process):
  launches resnet50 ...    the steps of ResNet-50's inference forward that launch device work (ops
                           and generated kernels; views and scalar fills do not), with the codegen
                           backend against the same graph's nodes one by one: ratio = eager / codegen;
  capture <model> loss     the first call of the compiled program (ms), against one eager call of the
                           same program: ratio = eager / capture, no target (capture runs the program
                           once eagerly, so it is at least one eager call);
  call <model> loss+backward  one graph call and its backward (ms), against an eager call and its backward: ratio =
                           eager / graph, target 1.0 (the issue asks the executor to be faster than
                           eager dispatch); the row also gives the graph's node count and the overhead
                           per node in microseconds ((graph - eager) / nodes).
  peak gpt2-124m loss+backward  the peak memory of one graph call and its backward beyond what was
                           allocated before it (MiB; each call starts without gradients), against the
                           eager call's: ratio = eager / compiled, target 1.0 (the min-cut partition
                           should not raise it); the row also gives the bytes the forward saves for the
                           backward, compiled and as eager autograd would;
  call <step> train step (reduce-overhead)  a whole training step (forward, backward, SGD with
                           momentum) compiled with mode ReduceOverhead and replayed as one CUDA graph,
                           against the same step eagerly; with --torch, PyTorch's eager step and its
                           torch.cuda.graph replay of the same step (torch_compile, with
                           torch_compile_kind saying so);
  call <work> forward (codegen)  the codegen backend's generated kernels, forward without autograd
                           (the inference rows, ResNet-50 and GPT-2 124M under bf16 autocast, also
                           give items per second: images or tokens),
                           against eager; with --torch, the same work in PyTorch eager and under
                           torch.compile (bench/torch/compile_ops.py), in alternating processes
                           (tessera, PyTorch, three times): torch_eager, torch_compile and
                           ratio_vs_torch = the faster PyTorch median / tessera's, verdict_vs_torch
                           from the spreads (parity where they overlap 1.0).
  --compile-time, into compile-time-<device>.json instead of the rows above:
  compile <model> first call (codegen) cold|warm cache  the first call of the codegen backend, which
                           captures, fuses, builds its kernels and runs (ms), with the kernel cache on
                           a fresh folder (cold: every kernel built) and then on the same folder in a
                           second process (warm: read back); beside it one eager call: ratio = eager /
                           first call, no target. The row gives the kernels, the builds, the cache hits,
                           codegen_ms and ms_per_build (codegen_ms over the builds). With --torch on the
                           GPU, torch.compile's first call (default mode) with Inductor's and Triton's
                           caches cold and warm likewise: torch_compile, ratio_vs_torch = PyTorch's
                           first call / tessera's.
Without --torch there is no PyTorch figure (the CPU side has Debian's 1.13, without Inductor).
The header's inductor_cache says whether Inductor's cache held entries when the run began (the
codegen rows' torch_compile_first_call_s are then warm-cache figures).
usage: run_compile.py [--device cpu|cuda] [--rounds 5] [--build build] [--torch] [--compile-time]
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_io import commit_id, gpu_info, run, verdict  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def compile_time_rows(exe, args):
    """The first-call rows, cold then warm, for tessera's codegen backend and (with --torch on the GPU)
    torch.compile, each side's caches on a fresh folder of its own."""
    out = []
    script = os.path.join(ROOT, "bench", "torch", "compile_ops.py")
    with tempfile.TemporaryDirectory(prefix="tessera-compile-time-") as tmp:
        ts_env = {"TESSERA_CACHE_DIR": os.path.join(tmp, "tessera")}
        pt_env = {"TORCHINDUCTOR_CACHE_DIR": os.path.join(tmp, "inductor"), "TRITON_CACHE_DIR": os.path.join(tmp, "triton")}
        for state in ("cold", "warm"):
            _, t = run([exe, "--device", args.device, "--compile-time"], "bench_compile --compile-time",
                       args.side_timeout, announce=True, env=ts_env)
            p = {}
            if args.torch and args.device.startswith("cuda"):
                _, p = run([sys.executable, script, "--device", args.device, "--compile-time"],
                           "compile_ops.py --compile-time", args.side_timeout, announce=True, env=pt_env)
            for name, r in t.items():
                first, eager = r["samples"][0], r["eager_samples"][0]
                row = {"work": f"{name} {state} cache", "unit": "ms", "tessera": first, "samples": r["samples"],
                       "reference": "tessera eager, one call of the same program", "reference_value": eager,
                       "reference_samples": r["eager_samples"], "ratio": eager / first, "target": None, "meets": None,
                       "kernels": r.get("kernels"), "builds": r.get("builds"), "cache_hits": r.get("cache_hits"),
                       "codegen_ms": r.get("codegen_ms"), "eager_calls": r.get("eager_calls"),
                       "ms_per_build": r["codegen_ms"] / r["builds"] if r.get("builds") else None,
                       "torch_eager": None, "torch_compile": None, "libtorch": None, "peak_mem_gib": None}
                if name in p and p[name].get("compile_samples"):
                    row["torch_compile"] = p[name]["compile_samples"][0]
                    row["torch_eager"] = p[name]["eager_samples"][0]
                    row["torch_compile_mode"] = "default"
                    row["ratio_vs_torch"] = row["torch_compile"] / first
                out.append(row)
    return out


def write_compile_time(exe, args):
    rows = compile_time_rows(exe, args)
    if not rows:
        print("bench_compile --compile-time produced no rows", file=sys.stderr)
        return 2
    gpu, driver = gpu_info() if args.device.startswith("cuda") else (None, None)
    torch_version = None
    if args.torch:
        import subprocess
        torch_version = subprocess.run([sys.executable, "-c", "import torch; print(torch.__version__)"],
                                       capture_output=True, text=True).stdout.strip() or None
    result = {"suite": f"compile-time-{args.device.split(':')[0]}", "device": gpu or "cpu", "cpu": cpu_name(),
              "driver": driver, "torch": torch_version, "commit": commit_id(ROOT),
              "date": datetime.date.today().isoformat(), "rows": rows}
    path = os.path.join(ROOT, "bench", "results", f"{result['suite']}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    for r in rows:
        vs = f"  torch.compile {r['torch_compile']:.0f} ms ({r['ratio_vs_torch']:.2f}x)" if r.get("torch_compile") else ""
        print(f"{r['work']:60s} {r['tessera']:10.1f} ms  kernels {r['kernels']} builds {r['builds']} "
              f"hits {r['cache_hits']} codegen {r['codegen_ms']:.0f} ms{vs}")
    print(f"wrote {path}")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--torch", action="store_true", help="the codegen rows against PyTorch, alternating")
    ap.add_argument("--side-timeout", type=int, default=1200,
                    help="--compile-time: seconds each process may take (the rows it printed are kept)")
    ap.add_argument("--compile-time", action="store_true",
                    help="only the first-call rows, cold and warm, into compile-time-<device>.json")
    args = ap.parse_args()
    exe = os.path.join(args.build, "bench", "bench_compile")
    if args.compile_time:
        return write_compile_time(exe, args)
    header, rows = run([exe, "--device", args.device, "--rounds", str(args.rounds)], "bench_compile", 3600,
                       announce=True)
    inductor_dir = os.environ.get("TORCHINDUCTOR_CACHE_DIR") or os.path.join(tempfile.gettempdir(),
                                                                             "torchinductor_" + os.environ.get("USER", "root"))
    inductor_cache = "warm" if os.path.isdir(inductor_dir) and os.listdir(inductor_dir) else "cold"
    torch_rows, torch_version = {}, None
    if args.torch:
        # Alternating processes: tessera's codegen rows, then PyTorch's, three times; samples pooled.
        for name in [n for n in rows if n.endswith(("(codegen)", "(reduce-overhead)"))]:
            rows[name]["samples"], rows[name]["eager_samples"] = [], []
        script = os.path.join(ROOT, "bench", "torch", "compile_ops.py")
        for _ in range(3):
            _, t = run([exe, "--device", args.device, "--rounds", str(args.rounds), "--only-codegen"], "bench_compile",
                       1800, announce=True)
            for name, r in t.items():
                if name in rows:
                    rows[name]["samples"] += r["samples"]
                    rows[name]["eager_samples"] += r["eager_samples"]
            th, p = run([sys.executable, script, "--device", args.device, "--rounds", str(args.rounds)],
                        "compile_ops.py", 1800, announce=True)
            torch_version = th.get("torch", torch_version)
            for name, r in p.items():
                acc = torch_rows.setdefault(name, {"eager": [], "compile": [], "compile_s": [],
                                                   "kind": r.get("compile_kind", "torch.compile max-autotune-no-cudagraphs")})
                acc["eager"] += r.get("eager_samples") or []
                acc["compile"] += r.get("compile_samples") or []
                if r.get("compile_s") is not None:
                    acc["compile_s"].append(r["compile_s"])
    if not rows:
        print("bench_compile produced no rows", file=sys.stderr)
        return 2
    out_rows = []
    for name, r in rows.items():
        s, e = r["samples"], r["eager_samples"]
        med, emed = statistics.median(s), statistics.median(e)
        row = {"work": name, "unit": r.get("unit", "ms"), "tessera": med, "tessera_min": min(s), "tessera_max": max(s),
               "reference": "tessera eager (same program, same process)", "reference_value": emed,
               "reference_min": min(e), "reference_max": max(e), "ratio": emed / med,
               "nodes": r.get("nodes"), "kernels": r.get("kernels"), "fused_nodes": r.get("fused_nodes"), "samples": s, "reference_samples": e,
               "torch_eager": None, "torch_compile": None, "libtorch": None, "peak_mem_gib": None}
        if name in torch_rows:
            t = torch_rows[name]
            row["torch_eager"] = statistics.median(t["eager"]) if t["eager"] else None
            row["torch_compile"] = statistics.median(t["compile"]) if t["compile"] else None
            row["torch_eager_samples"], row["torch_compile_samples"] = t["eager"], t["compile"]
            row["torch_compile_first_call_s"] = t["compile_s"]
            row["torch_compile_kind"] = t["kind"]
            best = min([v for v in (row["torch_eager"], row["torch_compile"]) if v is not None], default=None)
            if best is not None:
                row["ratio_vs_torch"] = best / med
                pool = t["compile"] if best == row["torch_compile"] else t["eager"]
                lo, hi = min(pool) / max(s), max(pool) / min(s)
                row["verdict_vs_torch"] = verdict(lo, hi)
        if r.get("items"):  # a throughput row: items per second from the per-call medians
            per_s = lambda ms: r["items"] * 1000.0 / ms if ms else None  # noqa: E731
            row["throughput_unit"] = f"{r['item']}/s"
            row["tessera_throughput"], row["eager_throughput"] = per_s(med), per_s(emed)
            for k in ("torch_eager", "torch_compile"):
                row[k + "_throughput"] = per_s(row[k]) if row[k] else None
        if name.startswith("launches"):
            row["ratio"] = emed / med  # fewer launches is better
            row["reference"] = "the same graph's nodes run one by one (eager)"
        if r.get("cuda_graphs") is not None:
            row["cuda_graphs"], row["cuda_graph_replays"] = r["cuda_graphs"], r["cuda_graph_replays"]
        if name.startswith("peak"):
            row["saved_bytes"], row["eager_saved_bytes"] = r.get("saved_bytes"), r.get("eager_saved_bytes")
        if name.startswith(("call", "peak")):
            row["target"] = 1.0
            row["meets"] = row["ratio"] >= 1.0
            # The spread decides: ratios from the extremes that overlap 1.0 are parity.
            lo, hi = min(e) / max(s), max(e) / min(s)
            row["verdict"] = verdict(lo, hi)
            if r.get("nodes") and name.startswith("call"):
                row["overhead_us_per_node"] = (med - emed) * 1000.0 / r["nodes"]
        else:
            row["target"] = None
            row["meets"] = None
        out_rows.append(row)
    gpu, driver = gpu_info() if args.device.startswith("cuda") else (None, None)
    result = {"suite": f"compile-{args.device.split(':')[0]}", "device": gpu or "cpu", "cpu": cpu_name(),
              "driver": driver, "torch": torch_version, "inductor_cache": inductor_cache if args.torch else None, "commit": commit_id(ROOT),
              "date": datetime.date.today().isoformat(), "rounds": args.rounds, "rows": out_rows}
    path = os.path.join(ROOT, "bench", "results", f"{result['suite']}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    for row in out_rows:
        extra = f" ({row['verdict']}, {row.get('overhead_us_per_node', 0):+.2f} us/node)" if "verdict" in row else ""
        vs = (f"  torch eager {row['torch_eager']} compile {row['torch_compile']} "
              f"ratio {row.get('ratio_vs_torch', 0):.3f} ({row.get('verdict_vs_torch')})") if row.get("torch_eager") else ""
        u = row["unit"]
        print(f"{row['work']:28s} {row['tessera']:10.3f} {u}  eager {row['reference_value']:10.3f} {u}  "
              f"ratio {row['ratio']:.3f}{extra}{vs}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
