"""What the Python benchmarks (overhead.py, train_step.py) share: the PyTorch side runs in a process of
its own, under the interpreter --python names (TESSERA_PYTHON, else this one), because the machine's
PyTorch need not live in the Python that tessera's module was built for (the GPU machine's is
/opt/torch/.venv/bin/python3). One round of a side is one process: it prints one JSON object, the last
line of its output. tessera's side runs in this process."""
import json
import os
import platform
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from bench_io import commit_id, verdict  # noqa: E402,F401  (verdict: for the writers)


def default_python():
    return os.environ.get("TESSERA_PYTHON", sys.executable)


def worker(python, script, args, timeout=600, env=None):
    """Runs `python script args` and returns the JSON object of its last output line."""
    cmd = [python, script] + list(args)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit status {p.returncode}\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def header(suite, device, rounds, torch_version):
    import datetime
    from bench_io import gpu_info
    dev = "cpu"
    if device == "cuda":
        dev = gpu_info()[0] or "cuda"
    return {"suite": suite, "device": dev, "cpu": cpu_name(), "torch": torch_version, "commit": commit_id(ROOT),
            "date": datetime.date.today().isoformat(), "rounds": rounds}


def write(suite, result):
    path = os.path.join(ROOT, "bench", "results", f"{suite}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.relpath(path, ROOT)}", file=sys.stderr)
