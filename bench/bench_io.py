"""What the benchmark drivers (run_cuda_micro.py, run_models.py, ...) share: running one side's program
and reading the JSON lines it prints (rows carry a "name"; other objects are header fields), the GPU's
name and driver from nvidia-smi, the software versions and clocks a GPU suite's header records
(gpu_environment, gpu_clocks), the commit the figures belong to, and the summaries of per-round figures
that the one-run writers share (run_program, spread, round_ratios, verdict)."""
import json
import os
import re
import statistics
import subprocess
import sys
import time


def commit_id(root):
    """The commit of the checkout at `root` as results record it: TESSERA_COMMIT when set (a copy of the
    tree whose git metadata lags behind it), else the short HEAD, with "-dirty" when tracked files differ
    from it (the figures then belong to no commit); None without git. Files under bench/results/ do not
    count: they are what the suites write, so a second suite of the same run, after the first rewrote
    its file, still measures the commit's code."""
    if os.environ.get("TESSERA_COMMIT"):
        return os.environ["TESSERA_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":(exclude)bench/results"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def json_lines(text):
    rows, header = {}, {}
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "name" in obj:
            rows[obj["name"]] = obj
        else:
            header.update(obj)
    return header, rows


def run(cmd, what, timeout, announce=False, env=None):
    """One side's (header, rows), or ({}, {}) with the reason printed when it could not run. env: variables
    set for the child on top of this process's environment."""
    if announce:
        print(f"==> {what}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired as e:
        # The rows printed before the limit are kept (each row is one complete line).
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        print(f"{what}: stopped after {timeout} s; keeping the rows it printed", file=sys.stderr)
        return json_lines(out[:out.rfind("\n") + 1])
    except OSError as e:
        print(f"{what}: could not run: {e}", file=sys.stderr)
        return {}, {}
    if p.returncode != 0 or (announce and p.stderr.strip()):
        print(f"{what}: exit status {p.returncode}\n{p.stderr[-3000:]}", file=sys.stderr)
    return json_lines(p.stdout)


def gpu_info():
    """(name, driver) of the first GPU, or (None, None)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
        name, driver = (s.strip() for s in out.split(",", 1))
        return name, driver
    except (OSError, subprocess.CalledProcessError, IndexError, ValueError):
        return None, None


CLOCK_FIELDS = ("clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem", "temperature.gpu", "power.draw")


def gpu_clocks():
    """The first GPU's clocks as nvidia-smi reads them now: {"sm_mhz", "mem_mhz", "max_sm_mhz", "max_mem_mhz",
    "temperature_c", "power_w"} (a field nvidia-smi cannot read is None), or None without nvidia-smi. A GPU
    suite reads them before its first timed run and after its last (header "clocks_before" and
    "clocks_after"), so that a run at a throttled clock shows in its file."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(CLOCK_FIELDS), "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, check=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired, IndexError):
        return None
    keys = ("sm_mhz", "mem_mhz", "max_sm_mhz", "max_mem_mhz", "temperature_c", "power_w")
    vals = []
    for v in out.split(","):
        try:
            vals.append(float(v.strip()))
        except ValueError:  # "[N/A]"
            vals.append(None)
    return dict(zip(keys, vals)) if len(vals) == len(keys) else None


TORCH_VERSIONS = ("import json, torch\n"
                  "nccl = None\n"
                  "try:\n    v = torch.cuda.nccl.version(); nccl = '.'.join(map(str, v)) if isinstance(v, tuple) else str(v)\n"
                  "except Exception:\n    pass\n"
                  "print(json.dumps({'torch': torch.__version__, 'torch_cuda': torch.version.cuda,\n"
                  "                  'cudnn': torch.backends.cudnn.version(), 'nccl': nccl}))\n")


def gpu_environment(python=sys.executable):
    """The header fields every GPU suite records besides its own: the GPU and driver (nvidia-smi), the CUDA
    toolkit tessera was built with (nvcc --version, the one on PATH or /usr/local/cuda), and PyTorch's
    version with the CUDA, cuDNN and NCCL it runs on (asked of `python` in a child process, so a driver
    need not import torch itself). A field that cannot be read is None."""
    name, driver = gpu_info()
    env = {"device": name, "driver": driver, "cuda": None, "torch": None, "torch_cuda": None, "cudnn": None,
           "nccl": None}
    for nvcc in ("nvcc", "/usr/local/cuda/bin/nvcc"):
        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=True, timeout=30).stdout
        except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
            continue
        m = re.search(r"release [0-9.]+, V([0-9.]+)", out)
        env["cuda"] = m.group(1) if m else None
        break
    try:
        out = subprocess.run([python, "-c", TORCH_VERSIONS], capture_output=True, text=True, check=True,
                             timeout=120).stdout.strip().splitlines()[-1]
        env.update(json.loads(out))
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired, IndexError, ValueError):
        pass
    return env


def run_program(cmd, what, timeout, env=None):
    """One side's run of a benchmark program: (header, rows, error). error is None when the program exited
    with status 0, else a one-line reason ("exit status N: <last line of stderr>", "stopped after N s", "could
    not run: ..."); the rows printed before a failure are kept (each row is one complete line). Progress and
    the program's wall time go to stderr, flushed. env: variables set for the child on top of this process's."""
    print(f"==> {what}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, **env) if env else None)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        error = f"{what}: stopped after {timeout} s"
        print(f"{error}; keeping the rows it printed", file=sys.stderr, flush=True)
        return json_lines(out[:out.rfind("\n") + 1]) + (error,)
    except OSError as e:
        error = f"{what}: could not run: {e}"
        print(error, file=sys.stderr, flush=True)
        return {}, {}, error
    error = None
    if p.returncode != 0:
        last = [line for line in p.stderr.splitlines() if line.strip()]
        error = f"{what}: exit status {p.returncode}" + (f": {last[-1].strip()[:300]}" if last else "")
        print(f"{what}: exit status {p.returncode}\n{p.stderr[-3000:]}", file=sys.stderr, flush=True)
    print(f"    {what}: {time.monotonic() - t0:.1f} s", file=sys.stderr, flush=True)
    return json_lines(p.stdout) + (error,)


def alternating_rounds(raw, programs, rounds, timeout):
    """Runs each (side, cmd, what) of programs once per round, the sides alternating so that clocks and
    neighbours hit them alike, between GPU clock readings: raw gains "clocks_before", "rounds" (one
    {side: {"header", "rows", "error"}} per round) and "clocks_after"."""
    t0 = time.monotonic()
    raw["clocks_before"] = gpu_clocks()
    raw["rounds"] = []
    for r in range(rounds):
        rnd = {}
        for side, cmd, what in programs:
            h, rows, err = run_program(cmd, f"round {r + 1}/{rounds}: {what}", timeout)
            rnd[side] = {"header": h, "rows": rows, "error": err}
        raw["rounds"].append(rnd)
        print(f"round {r + 1}/{rounds} done ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
    raw["clocks_after"] = gpu_clocks()


def fmt(x, w, d=3):
    """x in a column of width w with d decimals, or "-" where it is not a number."""
    return f"{x:{w}.{d}f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else f"{'-':>{w}s}"


def spread(values):
    """(median, min, max) of the numbers among values (a side's figure per round, None where a round has
    none), or (None, None, None) when there are none."""
    xs = [x for x in values if isinstance(x, (int, float)) and not isinstance(x, bool)]
    return (statistics.median(xs), min(xs), max(xs)) if xs else (None, None, None)


def verdict(lo, hi):
    """The verdict of a spread of ratios (higher is better for tessera): parity where it holds 1.0."""
    return "parity" if lo <= 1.0 <= hi else ("faster" if lo > 1.0 else "slower")


def round_ratios(tessera, reference, higher_is_better):
    """Per-round ratios oriented so that higher is better for tessera (tessera / reference for a rate,
    reference / tessera for a time), over the rounds where both sides have a figure."""
    out = []
    for t, r in zip(tessera, reference):
        if isinstance(t, (int, float)) and isinstance(r, (int, float)) and t > 0 and r > 0:
            out.append(t / r if higher_is_better else r / t)
    return out


def faster_side(medians, higher_is_better):
    """The side (a key of medians, in their order) with the best median; None where none has one. Ties go
    to the first (PyTorch eager before torch.compile)."""
    best = None
    for side, m in medians.items():
        if m is not None and (best is None or (m > medians[best] if higher_is_better else m < medians[best])):
            best = side
    return best


def ratio_summary(tessera, reference, higher_is_better):
    """(median, min, max, verdict) of the per-round ratios of round_ratios, or four Nones without any."""
    rs = round_ratios(tessera, reference, higher_is_better)
    if not rs:
        return None, None, None, None
    return statistics.median(rs), min(rs), max(rs), verdict(min(rs), max(rs))


def round_value(out):
    """A side's figure of one round from its output (the program's line for the row): its positive "value",
    else None (the row raised, or the side did not run)."""
    v = out.get("value") if isinstance(out, dict) else None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 else None


def as_output(line, drop=("name",)):
    """A program's line for a row as the row keeps it (one side's output of one round): without its name
    (and the other keys in drop), and with an "error" where its value is no positive number and it gives
    no reason (a time that printed as null: not finite)."""
    out = {k: v for k, v in line.items() if k not in drop}
    if round_value(out) is None and not out.get("error"):
        out["error"] = f"value {out.get('value')!r} is not a positive number"
    return out


def summarize_sides(row, per_round, sides):
    """Into row: per side its per-round figures ("<side>_rounds"), their median and min-max ("<side>",
    "<side>_min", "<side>_max"); the outputs themselves ("samples", one {side: output} per round); and the
    last error of each side ("errors")."""
    for side in sides:
        vals = [round_value(o[side]) for o in per_round]
        row[side], row[side + "_min"], row[side + "_max"] = spread(vals)
        row[side + "_rounds"] = vals
    row["samples"] = per_round
    row["errors"] = {}
    for o in per_round:
        for side in sides:
            if isinstance(o[side], dict) and o[side].get("error"):
                row["errors"][side] = o[side]["error"]


def set_ratio(row, prefix, tessera_rounds, reference_rounds, higher_is_better):
    """Into row: ratio_summary as prefix, prefix_min, prefix_max and the verdict ("ratio" -> "verdict",
    "ratio_vs_torch" -> "verdict_vs_torch")."""
    ratio, lo, hi, v = ratio_summary(tessera_rounds, reference_rounds, higher_is_better)
    row[prefix], row[prefix + "_min"], row[prefix + "_max"] = ratio, lo, hi
    row["verdict" + prefix[len("ratio"):]] = v


def raw_last(row):
    """row with its raw samples ("<side>_rounds", "samples") moved after its figures, for the reader."""
    return {k: row[k] for k in sorted(row, key=lambda k: k == "samples" or k.endswith("_rounds"))}
