"""What the benchmark drivers (run_cuda_micro.py, run_models.py, ...) share: running one side's program
and reading the JSON lines it prints (rows carry a "name"; other objects are header fields), the GPU's
name and driver from nvidia-smi, and the commit the figures belong to."""
import json
import os
import subprocess
import sys


def commit_id(root):
    """The commit of the checkout at `root` as results record it: TESSERA_COMMIT when set (a copy of the
    tree whose git metadata lags behind it), else the short HEAD, with "-dirty" when tracked files differ
    from it (the figures then belong to no commit); None without git."""
    if os.environ.get("TESSERA_COMMIT"):
        return os.environ["TESSERA_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
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
