#!/usr/bin/env python3
"""Runs kill_mid_step under mpirun on 2 ranks; passes when the job ends non-zero within the limit and rank
0 printed the timeout error naming the all-reduce, its sequence number and rank 1.

mpirun's default policy ends the whole job as soon as a rank dies, before any timeout could fire; the
timeout is what catches a rank that dies or hangs where the launcher does not see it, so the test turns
that policy off (orte_abort_on_non_zero_status 0) to let rank 0 find out by itself.
Usage: kill_mid_step.py MPIEXEC EXE"""
import os, re, subprocess, sys, time

mpiexec, exe = sys.argv[1], sys.argv[2]
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
cmd = [mpiexec, "--oversubscribe", "--mca", "orte_abort_on_non_zero_status", "0", "-np", "2", exe]
t0 = time.time()
p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
elapsed = time.time() - t0
print(p.stdout)
print(f"exit status {p.returncode} after {elapsed:.1f} s")
ok = True
if p.returncode == 0:
    print("FAIL: the job exited 0"); ok = False
pat = r"rank 0: all_reduce \(sequence number \d+\) timed out after 3000 ms on rank 0 of 2: ranks \[1\] did not arrive"
if not re.search(pat, p.stdout):
    print("FAIL: rank 0 did not print the timeout message"); ok = False
if elapsed > 3.0 + 15.0:  # the 3 s timeout, plus start-up and the job's teardown on 2 loaded cores
    print("FAIL: took too long"); ok = False
sys.exit(0 if ok else 1)
