"""The honest count of a ctest run: how many tests ran and passed, failed, or were skipped, and how
many of the skipped need a GPU (ctest label `gpu`), so that a CPU-only run never reads as if the GPU
tests had passed. `./run test` prints it after ctest.

usage: ctest_summary.py BUILD_DIR JUNIT.xml
JUNIT.xml is what `ctest --output-junit` wrote; the labels come from `ctest --show-only=json-v1`.
"""
import json
import subprocess
import sys
import xml.etree.ElementTree as ET


def labels(build):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True,
                         check=True).stdout
    r = {}
    for t in json.loads(out).get("tests", []):
        for p in t.get("properties", []):
            if p.get("name") == "LABELS":
                r[t["name"]] = set(p.get("value", []))
    return r


def main():
    build, junit = sys.argv[1], sys.argv[2]
    lab = labels(build)
    passed = failed = skipped = skipped_gpu = ran_gpu = 0  # ran_gpu: gpu-labelled tests that ran
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name")
        gpu = "gpu" in lab.get(name, set())
        status = case.get("status", "")
        if case.find("failure") is not None or case.find("error") is not None or status == "fail":
            failed += 1
        elif case.find("skipped") is not None or status in ("notrun", "disabled"):
            skipped += 1
            skipped_gpu += gpu
        else:
            passed += 1
            ran_gpu += gpu
    ran = passed + failed
    print(f"==> ctest: {ran} tests ran ({ran - ran_gpu} CPU tests, {ran_gpu} labelled gpu): {passed} passed, {failed} "
          f"failed; {skipped} skipped, not passed ({skipped_gpu} of them labelled gpu)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
