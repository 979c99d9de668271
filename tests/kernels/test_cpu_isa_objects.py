#!/usr/bin/env python3
"""Checks the machine code of libtessera (Note [CPU ISA dispatch] in src/runtime/cpu_isa.h): no function
outside the avx2 and avx512 namespaces of the dispatched CPU kernels uses a ymm or zmm register (AVX,
AVX2, AVX-512), so a run at the baseline level executes no such instruction in tessera's code; and each
of those namespaces does hold vector code of its level (else the levels would not be built as intended).

Usage: test_cpu_isa_objects.py LIBTESSERA.so
"""
import re
import subprocess
import sys

FUNC = re.compile(r"^[0-9a-f]+ <(.*)>:$")
LEVEL_NS = re.compile(r"tessera::cpu::(avx2|avx512)::")


def main():
    lib = sys.argv[1]
    proc = subprocess.Popen(["objdump", "-d", "--no-show-raw-insn", "-C", lib], stdout=subprocess.PIPE,
                            text=True, errors="replace")
    name, bad, ymm_in = None, {}, {"avx2": 0, "avx512": 0}
    zmm_in_avx512 = 0
    for line in proc.stdout:
        m = FUNC.match(line)
        if m:
            name = m.group(1)
            continue
        if name is None or ("%ymm" not in line and "%zmm" not in line):
            continue
        lv = LEVEL_NS.search(name)
        if lv:
            ymm_in[lv.group(1)] += 1
            if lv.group(1) == "avx512" and "%zmm" in line:
                zmm_in_avx512 += 1
        elif "[clone" not in name or not LEVEL_NS.search(name):
            bad.setdefault(name, line.strip())
    if proc.wait() != 0:
        print(f"objdump failed on {lib}")
        return 1
    ok = True
    if bad:
        ok = False
        print(f"{len(bad)} functions outside the avx2/avx512 kernel namespaces use AVX registers:")
        for n, l in list(bad.items())[:40]:
            print(f"  {n}: {l}")
    if ymm_in["avx2"] == 0:
        ok = False
        print("the avx2 kernels hold no ymm instruction: the avx2 level is not built for AVX2")
    if zmm_in_avx512 == 0:
        ok = False
        print("the avx512 kernels hold no zmm instruction: the avx512 level is not built for AVX-512")
    print(f"AVX instructions: avx2 namespace {ymm_in['avx2']}, avx512 namespace {ymm_in['avx512']} "
          f"({zmm_in_avx512} on zmm), elsewhere {len(bad)} functions")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
