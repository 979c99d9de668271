#!/usr/bin/env python3
"""Self-test of the results check (test_results.py) on the GPU suites written whole from one run:
bench/run_cuda_micro.py (cuda-micro.json) and bench/run_amp_graphs.py (amp-graphs.json). Their committed
files may still be of the old format (LEGACY_AWAITING_REGENERATION) and CI has no GPU, so this builds
documents with each writer's own build_document() from synthetic program outputs (as
bench/cuda/bench_cuda_micro.cpp, bench/torch/cuda_micro.py, bench/cuda/bench_cuda_graph.cpp,
bench/torch/cuda_graph.py and `tessera train` print them: per-call samples, a row that raised, a
process that stopped part-way, a torch.compile that failed, a training past its time limit), and
requires that:
  - the check passes each built document, under the file name its writer gives it (a partial run's
    <suite>-partial.json included), and fails a partial document under the whole suite's name;
  - the check fails the document once any figure of any row is altered (every key of every row but
    its names, note, layout and target, each alone), once a round's per-call samples are scaled, once
    an accuracy line is edited, and once a header field the suites require is dropped or wrong.
Standard library only. Prints one line per document; exit status 1 on any failure.
usage: test_one_run_writers.py
"""
import importlib.util
import json
import os
import random
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


results = load("test_results", os.path.join(HERE, "test_results.py"))
cuda_micro = load("run_cuda_micro", os.path.join(ROOT, "bench", "run_cuda_micro.py"))
amp_graphs = load("run_amp_graphs", os.path.join(ROOT, "bench", "run_amp_graphs.py"))
# The documents built here are of the one-run format: check them as such.
results.LEGACY_AWAITING_REGENERATION.difference_update({"cuda-micro.json", "amp-graphs.json"})

ENV = {"device": "NVIDIA H200", "driver": "580.159.04", "cuda": "13.0.48", "torch": "2.11.0+cu130",
       "torch_cuda": "13.0", "cudnn": 91400, "nccl": "2.27.7"}
CLOCKS = {"sm_mhz": 1980.0, "mem_mhz": 3201.0, "max_sm_mhz": 1980.0, "max_mem_mhz": 3201.0, "temperature_c": 41.0,
          "power_w": None}
NOT_FIGURES = {"work", "name", "layer", "note", "layout", "target", "libtorch"}


# ---------------------------------------------------------------------------------------------------
# Synthetic program outputs, as the programs print them.

def per_call(rng, base_ms, runs):
    return [base_ms * rng.uniform(0.97, 1.05) for _ in range(runs)]


WORK = {"GB/s": "bytes", "TFLOP/s": "flops", "us/op": "ops"}


def micro_line(rng, name, unit, base_ms, runs, amount):
    s = per_call(rng, base_ms, runs)
    ms = statistics.median(s)
    value = {"GB/s": lambda: amount / (ms * 1e-3) / 1e9, "TFLOP/s": lambda: amount / (ms * 1e-3) / 1e12,
             "us/op": lambda: ms * 1e3 / amount, "ms": lambda: ms}[unit]()
    out = {"name": name, "unit": unit, "value": value, "ms": ms, "peak_mem_gib": 1.5 + rng.random(),
           "samples_ms": s}
    if unit in WORK:
        out[WORK[unit]] = amount
    return out


MICRO_WORK = {"GB/s": (0.8, 3 << 30), "TFLOP/s": (1.6, 1.1e12), "us/op": (5.0, 1000), "ms": (0.2, None)}
CONV_LAYERS = ["conv1_7x7_3_64_s2", "l1_1x1_64_64", "l1_3x3_64_64"]


def micro_program(rng, side, only, runs, compile_on):
    """One process's rows (name -> line) of bench_cuda_micro (side "tessera") or cuda_micro.py ("torch")."""
    rows = {}
    for name, (_, kind, _) in cuda_micro.ROWS.items():
        if not cuda_micro.selected(name, only) or name == "conv2d_rn50_b256_bf16_fwd_bwd":
            continue
        unit = cuda_micro.UNITS[kind]
        base, amount = MICRO_WORK[unit]
        rows[name] = micro_line(rng, name, unit, base * (1.0 if side == "tessera" else 1.02), runs, amount)
        if side == "torch" and compile_on and name in cuda_micro.COMPILED:
            c = micro_line(rng, name, unit, base * rng.choice((0.9, 1.1)), runs, amount)
            rows[name]["compile"] = {k: c[k] for k in ("value", "ms", "samples_ms")}
    if cuda_micro.selected("conv2d_rn50_b256_bf16", only):
        total = 0.0
        for layer in CONV_LAYERS:
            name = cuda_micro.CONV_PREFIX + layer
            if cuda_micro.selected(name, only):
                rows[name] = micro_line(rng, name, "ms", rng.uniform(0.2, 6.0), runs, None)
                rows[name]["layout"] = "channels_last"
                total += rows[name]["ms"]
        if cuda_micro.selected("conv2d_rn50_b256_bf16_fwd_bwd", only):
            rows["conv2d_rn50_b256_bf16_fwd_bwd"] = {"name": "conv2d_rn50_b256_bf16_fwd_bwd", "unit": "ms",
                                                     "value": total, "ms": total, "peak_mem_gib": 2.0,
                                                     "layout": "channels_last", "layers": len(CONV_LAYERS)}
    return rows


def micro_raw(seed, only="", compile_on=True, rounds=3, failures=True):
    rng = random.Random(seed)
    runs = 20
    raw = {"env": ENV, "clocks_before": CLOCKS, "clocks_after": dict(CLOCKS, temperature_c=55.0), "commit": "1a2b3c4",
           "date": "2026-12-01T10:00:00+00:00", "only": only, "compile": compile_on, "runs": runs, "rounds": []}
    for r in range(rounds):
        ts = {"header": {"device": "NVIDIA H200", "sm": 90},
              "rows": micro_program(rng, "tessera", only, runs, compile_on), "error": None}
        pt = {"header": {"device": "NVIDIA H200", "torch": "2.11.0+cu130"},
              "rows": micro_program(rng, "torch", only, runs, compile_on), "error": None}
        if failures and r == 1 and "gelu_bf16_256M" in ts["rows"]:  # a row that raised
            ts["rows"]["gelu_bf16_256M"] = {"name": "gelu_bf16_256M", "unit": "GB/s", "value": None,
                                            "error": "NotImplementedError: gelu on bfloat16"}
        if failures and r == 0 and "copy_f32_256M" in pt["rows"] and compile_on:  # torch.compile failed
            pt["rows"]["copy_f32_256M"]["compile"] = {"value": None, "error": "BackendCompilerFailed: ..."}
        if failures and r == 2:  # PyTorch's process stopped after its first rows
            names = list(pt["rows"])
            pt["rows"] = {n: pt["rows"][n] for n in names[:len(names) // 2]}
            pt["error"] = "round 3/3: cuda_micro.py: exit status -6: CUDA error: an illegal memory access"
        raw["rounds"].append({"tessera": ts, "torch": pt})
    return raw


def graph_line(rng, name, unit, base_ms, runs, iters):
    s = per_call(rng, base_ms, runs)
    ms = statistics.median(s)
    return {"name": name, "unit": unit, "value": 1000.0 / ms if unit == "steps/s" else ms, "ms": ms,
            "iters": iters, "samples_ms": s}


GRAPH_MS = {"step200_eager": (1.46, 2.45), "step200_graph": (0.278, 0.222),
            "mlp_784_512_512_10_b128_sgd_eager": (0.28, 1.12), "mlp_784_512_512_10_b128_sgd_graph": (0.151, 0.153)}


def train_stdout(accs):
    return "".join(f"epoch {i + 1}/6  train loss 0.4{i}00  test loss 0.3{i}00  test accuracy {a:.2f}%  2.1s "
                   f"(28571 items/s)\n" for i, a in enumerate(accs))


def graph_raw(seed, accuracy=True, rounds=3, failures=True):
    rng = random.Random(seed)
    runs, iters = 20, 50
    raw = {"env": ENV, "clocks_before": CLOCKS, "clocks_after": None, "commit": "1a2b3c4",
           "date": "2026-12-01T10:00:00+00:00", "runs": runs, "iters": iters, "rounds": []}
    for r in range(rounds):
        rnd = {}
        for i, side in enumerate(("tessera", "torch")):
            rows = {name: graph_line(rng, name, amp_graphs.GRAPH_ROWS[name][1], ms[i], runs, iters)
                    for name, ms in GRAPH_MS.items()}
            rnd[side] = {"header": {"device": "NVIDIA H200"}, "rows": rows, "error": None}
        if failures and r == 2:
            rnd["tessera"]["rows"]["mlp_784_512_512_10_b128_sgd_graph"] = {
                "name": "mlp_784_512_512_10_b128_sgd_graph", "unit": "steps/s", "value": None,
                "error": "DeviceError: cudaGraphInstantiate: operation not permitted when stream is capturing"}
        raw["rounds"].append(rnd)
    if accuracy:
        f32 = [86.31, 88.02, 89.1, 89.77, 90.41, 90.9]
        bf16 = [86.2, 87.95, 89.2, 89.61, 90.3, 90.78]
        bf16_run = {"command": ["train", "--amp", "bf16"], "stdout": train_stdout(bf16), "seconds": 14.2, "error": None}
        if failures:  # the bf16 training ran past its time limit after three epochs
            bf16_run = {"command": ["train", "--amp", "bf16"], "stdout": train_stdout(bf16[:3]), "seconds": 240.0,
                        "error": "tessera train: stopped after 240 s"}
        raw["accuracy"] = {"float32": {"command": ["train", "--amp", "off"], "stdout": train_stdout(f32),
                                       "seconds": 13.9, "error": None}, "bf16": bf16_run}
    else:
        raw["accuracy"] = None
    return raw


# ---------------------------------------------------------------------------------------------------
# The check of a built document, and of every alteration of it.

def check(doc, file, tmp):
    path = os.path.join(tmp, file)
    with open(path, "w") as f:
        f.write(json.dumps(doc))
    return results.check_file(path)


def altered(v):
    """v changed: another number, the other bool, null made a number, a string or list or object edited."""
    if isinstance(v, bool):
        return not v
    if isinstance(v, (int, float)):
        return v * 1.01 + 0.001
    if v is None:
        return 1.0
    if isinstance(v, str):
        return v + " (edited)"
    if isinstance(v, list):
        out = list(v)
        for i, x in enumerate(out):
            if isinstance(x, (int, float, type(None))) and not isinstance(x, bool):
                out[i] = altered(x)
                return out
        return out + [1.0]
    if isinstance(v, dict):
        return dict(v, edited=1.0)
    raise TypeError(type(v))


def row_lists(doc):
    return [("rows", doc["rows"])] + ([("conv_layers", doc["conv_layers"])] if doc.get("conv_layers") else [])


class Alteration:
    """One change of a document in place: container[key] set to value (deleted where value is DELETE), and
    undone by restore()."""
    DELETE = object()

    def __init__(self, what, container, key, value):
        self.what, self.container, self.key, self.value = what, container, key, value

    def apply(self):
        self.old = self.container[self.key]
        if self.value is Alteration.DELETE:
            del self.container[self.key]
        else:
            self.container[self.key] = self.value

    def restore(self):
        self.container[self.key] = self.old


def alterations(doc, rows_too=True):
    """Every figure of every row, each round's per-call samples of each side, an accuracy line of each
    training (rows_too), and the header fields the one-run suites require."""
    for list_key, rows in row_lists(doc) if rows_too else ():
        for i, row in enumerate(rows):
            where = f"{list_key}[{i}] ({row.get('name')})"
            for key in list(row):
                if key not in NOT_FIGURES:
                    yield Alteration(f"{where} {key}", row, key, altered(row[key]))
            samples = row.get("samples")
            if isinstance(samples, list):
                for r, per_side in enumerate(samples):
                    for side, out in per_side.items():
                        if isinstance(out, dict) and out.get("samples_ms"):
                            yield Alteration(f"{where} round {r} {side} samples_ms", out, "samples_ms",
                                             [x * 1.1 for x in out["samples_ms"]])
            elif isinstance(samples, dict):  # the accuracy row's trainings
                for mode, run in samples.items():
                    if run["accuracy_lines"]:
                        lines = list(run["accuracy_lines"])
                        lines[-1] = lines[-1].replace("test accuracy ", "test accuracy 1")
                        yield Alteration(f"{where} {mode} accuracy line", run, "accuracy_lines", lines)
    for key in ("clocks_before", "device", "cudnn", "torch_cuda", "nccl", "partial", "rounds"):
        yield Alteration(f"header without {key}", doc, key, Alteration.DELETE)
    for key, value in (("rounds", 2), ("partial", not doc["partial"]), ("commit", "1a2b3c4-dirty"),
                       ("clocks_after", {"sm_mhz": 1}), ("date", "yesterday")):
        yield Alteration(f"header {key} {value!r}", doc, key, value)


def self_test(label, doc, file, tmp, wrong_file=None, rows_too=True):
    """The check passes doc as file (and fails it as wrong_file), and fails every alteration of it (of its
    header alone where not rows_too)."""
    problems = []
    ok, line = check(doc, file, tmp)
    if not ok:
        problems.append(f"the built document fails: {line}")
    if wrong_file:
        ok, _ = check(doc, wrong_file, tmp)
        if ok:
            problems.append(f"passes under the name {wrong_file}")
    n = missed = 0
    for a in alterations(doc, rows_too):
        n += 1
        a.apply()
        ok, _ = check(doc, file, tmp)
        a.restore()
        if ok:
            missed += 1
            problems.append(f"passes with {a.what} altered")
    status = "FAIL" if problems else "ok  "
    print(f"{status}  {label}: {line.split(': ', 1)[1] if ': ' in line else line}; {n} alterations, "
          f"{n - missed} caught", flush=True)
    for p in problems:
        print(f"        {p}")
    return not problems


def expect(label, cond):
    print(f"{'ok  ' if cond else 'FAIL'}  {label}")
    return cond


def main():
    ok = True
    with tempfile.TemporaryDirectory(prefix="tessera-results-selftest-") as tmp:
        whole = cuda_micro.build_document(micro_raw(1))
        ok &= expect("cuda-micro: a whole run is not partial", whole["partial"] is False)
        ok &= expect("cuda-micro: a failed side is null with its error",
                     any(r["errors"] and None in r["tessera_rounds"] + r["torch_eager_rounds"] for r in whole["rows"]))
        ok &= expect("cuda-micro: a reference is torch.compile where it is the faster",
                     any(r["reference"] == "torch.compile" for r in whole["rows"]))
        ok &= expect("cuda-micro: parity where the spread holds 1.0",
                     all((r["verdict"] == "parity") == (r["ratio_min"] <= 1.0 <= r["ratio_max"])
                         for r in whole["rows"] if r["ratio"] is not None))
        ok &= self_test("cuda-micro.json (3 rounds, failures)", whole, "cuda-micro.json", tmp,
                        wrong_file="cuda-micro-partial.json")
        ok &= self_test("cuda-micro.json (3 rounds, no failures)",
                        cuda_micro.build_document(micro_raw(2, failures=False)), "cuda-micro.json", tmp, rows_too=False)
        part = cuda_micro.build_document(micro_raw(3, only=f"add_,conv2d,{cuda_micro.COPY}", rounds=1))
        ok &= self_test("cuda-micro-partial.json (--only, 1 round)", part, "cuda-micro-partial.json", tmp,
                        wrong_file="cuda-micro.json")
        no_compile = cuda_micro.build_document(micro_raw(4, compile_on=False))
        ok &= self_test("cuda-micro-partial.json (--no-compile)", no_compile, "cuda-micro-partial.json", tmp,
                        wrong_file="cuda-micro.json", rows_too=False)

        whole = amp_graphs.build_document(graph_raw(5))
        ok &= expect("amp-graphs: the accuracy row of a training past its limit is null with its error",
                     whole["rows"][-1]["tessera"] is None and bool(whole["rows"][-1]["errors"]))
        ok &= self_test("amp-graphs.json (3 rounds, failures)", whole, "amp-graphs.json", tmp,
                        wrong_file="amp-graphs-partial.json")
        ok &= self_test("amp-graphs.json (3 rounds, no failures)",
                        amp_graphs.build_document(graph_raw(6, failures=False)), "amp-graphs.json", tmp)
        part = amp_graphs.build_document(graph_raw(7, accuracy=False))
        ok &= self_test("amp-graphs-partial.json (--skip-accuracy)", part, "amp-graphs-partial.json", tmp,
                        wrong_file="amp-graphs.json")

        # The training's record names its data by content, never by the folder's path.
        data = os.path.join(tmp, "some-machines-folder")
        os.makedirs(data)
        with open(os.path.join(data, "t10k-labels-idx1-ubyte.gz"), "wb") as f:
            f.write(b"abc")
        run = amp_graphs.train(os.path.join(tmp, "no-build"), "bf16", data, 5)
        ok &= expect("amp-graphs: a training's record holds its data's SHA-256 and not the folder's path",
                     run["data"] == {"t10k-labels-idx1-ubyte.gz": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}
                     and "some-machines-folder" not in json.dumps(run) and run["command"][-1] == "fashion-mnist:DATA"
                     and run["error"].startswith("tessera train: could not run"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
