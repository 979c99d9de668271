#!/usr/bin/env python3
"""bench_io.commit_id, the commit a results file records: in a scratch git repository, a clean tree
gives the short HEAD; a change to a tracked file gives "<head>-dirty"; a change under bench/results/
alone (a suite's own output, written before the next suite of the same run) does not; TESSERA_COMMIT
overrides. Standard library and git only. Exit status 1 on any failure.
usage: test_commit_id.py
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench"))
from bench_io import commit_id  # noqa: E402


def git(root, *args):
    return subprocess.run(["git", "-C", root, *args], check=True, capture_output=True, text=True).stdout.strip()


def main():
    if shutil.which("git") is None:
        print("skipped: no git")
        return 0
    failures = 0

    def expect(what, got, want):
        nonlocal failures
        ok = got == want
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'}  {what}: {got!r}" + ("" if ok else f", expected {want!r}"))

    os.environ.pop("TESSERA_COMMIT", None)
    with tempfile.TemporaryDirectory() as root:
        git(root, "init", "-q")
        os.makedirs(os.path.join(root, "bench", "results"))
        os.makedirs(os.path.join(root, "src"))
        for path, text in (("src/kernel.cpp", "int f();\n"), ("bench/results/suite.json", "{}\n")):
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        git(root, "add", "-A")
        git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "start")
        head = git(root, "rev-parse", "--short", "HEAD")
        expect("clean tree", commit_id(root), head)
        with open(os.path.join(root, "bench/results/suite.json"), "w") as f:
            f.write('{"rows": []}\n')
        expect("a results file rewritten", commit_id(root), head)
        with open(os.path.join(root, "src/kernel.cpp"), "a") as f:
            f.write("int g();\n")
        expect("a source file changed", commit_id(root), head + "-dirty")
        git(root, "checkout", "-q", "src/kernel.cpp")
        with open(os.path.join(root, "untracked.txt"), "w") as f:
            f.write("x\n")
        expect("an untracked file", commit_id(root), head)
        os.environ["TESSERA_COMMIT"] = "abcdef0"
        expect("TESSERA_COMMIT", commit_id(root), "abcdef0")
        os.environ.pop("TESSERA_COMMIT")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
