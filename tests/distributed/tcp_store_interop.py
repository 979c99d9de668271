#!/usr/bin/env python3
"""The TCPStore and the TCP rendezvous across processes (tcp_store_probe), then against PyTorch:

  1. two probe processes meet by the rendezvous with torch's env:// variables set by hand (rank 0
     hosts the store); no PyTorch needed, so CI runs it;
  2. where torch is importable: torch's TCPStore hosts (libuv and classic servers) and a tessera client
     reads, writes and counts in it; tessera's server hosts and torch's client runs every query it has
     (get, set, add, check, wait with and without a timeout, compare_set, append, multi_set/get,
     delete_key); and torchrun starts two probes, which meet in torchrun's agent store.

  tcp_store_interop.py PROBE
Exit status 0 when all ran and held; 1 on a failure. Without torch 2.x (Debian's is 1.13, whose store
spoke an older protocol), part 2 is skipped, saying so.
"""
import datetime
import os
import socket
import subprocess
import sys
import tempfile
import time

PROBE = sys.argv[1]
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rendezvous_lines(out):
    return sorted(l for l in out.splitlines() if l.startswith("rank "))


def by_hand():
    port = free_port()
    procs = []
    for rank in (1, 0):  # rank 1 first: it retries until rank 0 listens
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port))
        for k in ("TORCHELASTIC_USE_AGENT_STORE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID"):
            env.pop(k, None)
        procs.append(subprocess.Popen([PROBE, "rendezvous"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
        time.sleep(0.2)
    outs = [p.communicate(timeout=60) for p in procs]
    check(all(p.returncode == 0 for p in procs), "env:// by hand: both ranks exit 0 " + repr([o[1] for o in outs]))
    lines = rendezvous_lines("".join(o[0] for o in outs))
    check(len(lines) == 2 and lines[0].split(": ")[1] == lines[1].split(": ")[1] and "agent store 0" in lines[0],
          "env:// by hand: rank 1 got rank 0's value " + repr(lines))


def torch_hosts(dist, libuv):
    t = datetime.timedelta(seconds=30)
    try:
        store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=t, use_libuv=libuv)
    except TypeError:  # a torch before 2.3 has only the classic server
        if libuv:
            print("skipped: torch's libuv server (this torch has none)")
            return
        store = dist.TCPStore("127.0.0.1", 0, is_master=True, timeout=t)
    store.set("from_torch", "hello from torch")
    store.add("count", 1)
    p = subprocess.Popen([PROBE, "client", "127.0.0.1", str(store.port)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    got = store.get("from_tessera")
    store.set("torch_done", "1")
    out, err = p.communicate(timeout=60)
    tag = f"torch's server (use_libuv={libuv}): "
    check(p.returncode == 0, tag + "the tessera client exits 0 " + err.strip())
    check(got == b"hello from tessera", tag + "tessera's set reaches torch")
    check("from_torch=hello from torch" in out, tag + "torch's set reaches tessera")
    check("count=3" in out and int(store.add("count", 0)) == 3, tag + "add counts on both sides")
    check("check=1" in out, tag + "check")


def tessera_hosts(dist):
    tag = "tessera's server, torch's client: "
    with tempfile.TemporaryDirectory() as d:
        pf = os.path.join(d, "port")
        p = subprocess.Popen([PROBE, "server", pf], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(300):
            if os.path.exists(pf) and open(pf).read().strip():
                break
            time.sleep(0.1)
        port = int(open(pf).read())
        c = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=30))
        check(c.get("from_tessera") == b"hello from tessera's server", tag + "get")
        c.set("from_torch", "hello from torch")
        check(c.add("count", 5) == 5 and c.add("count", 2) == 7, tag + "add")
        check(c.check(["from_tessera", "count"]) and not c.check(["nope"]), tag + "check")
        check(c.compare_set("cas", "", "first") == b"first" and c.compare_set("cas", "wrong", "x") == b"first",
              tag + "compare_set")
        c.append("cas", "+")
        check(c.get("cas") == b"first+", tag + "append")
        if hasattr(c, "multi_set"):
            c.multi_set(["a", "b"], ["1", "2"])
            check(c.multi_get(["a", "b"]) == [b"1", b"2"], tag + "multi_set, multi_get")
        else:  # a torch before 2.1
            print("skipped: multi_set, multi_get (this torch has none)")
            c.set("a", "1")
            c.set("b", "2")
        c.wait(["a", "b"])
        t0 = time.time()
        try:
            c.wait(["never"], datetime.timedelta(milliseconds=300))
            timed_out = False
        except Exception:
            timed_out = True
        check(timed_out and time.time() - t0 < 10, tag + "wait with a timeout raises (WAIT, CANCEL_WAIT)")
        check(c.get("a") == b"1", tag + "the connection still works after a cancelled wait")
        check(c.delete_key("a") and not c.delete_key("a"), tag + "delete_key")
        c.set("done", "1")
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, tag + "the tessera server exits 0 " + err.strip())
        check("from_torch=hello from torch" in out and "count=7" in out, tag + "torch's writes reach tessera")


def torchrun():
    port = free_port()
    # --no-python: the probe is a binary; without it torchrun starts `python PROBE`, which fails.
    cmd = [sys.executable, "-m", "torch.distributed.run", "--no-python", "--nproc_per_node", "2",
           "--master_addr", "127.0.0.1", "--master_port", str(port), PROBE, "rendezvous"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    lines = rendezvous_lines(r.stdout)
    check(r.returncode == 0, "torchrun --nproc_per_node 2: exit 0 " + (r.stderr if len(r.stderr) <= 4000
                                                               else r.stderr[:2000] + "\n...\n" + r.stderr[-2000:]))
    check(len(lines) == 2 and lines[0].split(": ")[1] == lines[1].split(": ")[1],
          "torchrun: both ranks hold rank 0's value " + repr(lines))
    print("      " + "\n      ".join(lines))


try:
    import torch.distributed as dist
except Exception as e:  # noqa: BLE001
    dist, why = None, str(e)
    # The Python that has torch (a virtual environment's python resolves to the same binary as the
    # system's, so the paths are compared as given; the variable marks the second start).
    other = os.environ.get("TESSERA_PYTHON")
    if other and os.path.abspath(other) != os.path.abspath(sys.executable) and not os.environ.get("TESSERA_INTEROP_AGAIN"):
        os.environ["TESSERA_INTEROP_AGAIN"] = "1"
        os.execv(other, [other] + sys.argv)
by_hand()
if dist is not None:
    import torch
    major = int(torch.__version__.split(".")[0])
    if major < 2:  # 1.x spoke an older wire format (Note [TCPStore wire format])
        dist, why = None, f"torch {torch.__version__} speaks the TCPStore protocol of 1.x"
if dist is None:
    print(f"skipped: the parts against PyTorch ({why})")
else:
    for libuv in (True, False):
        torch_hosts(dist, libuv)
    tessera_hosts(dist)
    torchrun()
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
